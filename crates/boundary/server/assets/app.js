// Live parts of the livestate web pages: an element with data-live="<events url>" and
// data-fragment="<html url>" reloads its content from the fragment whenever the server says
// something changed (server-sent events). Everything else is plain HTML.
(function () {
  for (const el of document.querySelectorAll("[data-live]")) {
    const events = new EventSource(el.dataset.live);
    let busy = false;
    events.addEventListener("changed", async () => {
      if (busy) return;
      busy = true;
      try {
        const r = await fetch(el.dataset.fragment, { credentials: "same-origin" });
        if (r.ok) el.innerHTML = await r.text();
      } finally {
        busy = false;
      }
    });
  }
})();
