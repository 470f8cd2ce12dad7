"""examples/procurement_agent.py end to end: run as a process, it proposes for a shortage
and waits; the test decides as a person; the agent prints the decision and exits 0."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from conftest import Company

from livestate_client import Client

AGENT = Path(__file__).resolve().parent.parent / "examples" / "procurement_agent.py"


def _lines(stream, q: "queue.Queue[str | None]") -> None:
    for line in stream:
        q.put(line.rstrip("\n"))
    q.put(None)


def test_the_example_agent_proposes_citing_every_input_and_prints_the_decision(
    url: str, agent_token: str, agent: Client, person: Client, company: Company
) -> None:
    company.shortage(on_hand=20, reserved=5, reorder_point=40, target=100)
    env = dict(os.environ, LIVESTATE_URL=url, LIVESTATE_TOKEN=agent_token)
    proc = subprocess.Popen(
        [sys.executable, str(AGENT), "--item", company.item, "--wait", "60", "--poll", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    out: "queue.Queue[str | None]" = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, out), daemon=True).start()
    seen: list[str] = []
    try:
        # Wait (bounded) for the agent to say it proposed and is waiting.
        proposal_id = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                line = out.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            seen.append(line)
            if line.startswith("proposed "):
                proposal_id = line.split()[1].rstrip(":")
            if line.startswith("waiting "):
                break
        assert proposal_id, "the agent did not propose:\n" + "\n".join(seen) + "\n" + (proc.stderr.read() if proc.poll() is not None else "")
        assert proc.poll() is None, "the agent exited before the decision:\n" + "\n".join(seen)

        # What it proposed: available 15 < 40, order 85 rounded up to the low-risk supplier's pack of 10.
        detail = person.proposal(proposal_id)
        assert detail.proposal.status == "pending"
        assert detail.document.action == {"item": company.item, "location": "north", "supplier": company.supplier, "qty": 90}
        assert detail.document.kind == "stock_replenishment"
        sheet = person.sheet(proposal_id)
        assert {i.name: i.value for i in sheet.inputs} == {
            "on_hand": 20, "reserved": 5, "inbound": None, "reorder_point": 40, "target": 100,
            "pack_size": 10, "unit_price": "1.50", "supplier_risk": "low",
        }
        assert sheet.verdict.one_instant is True
        assert any(line.startswith("read stock: 1 row(s) at snapshot ") for line in seen), seen
        assert f"sheet: Order 90 x {company.item} from {company.supplier} for north: available 15 < reorder point 40; all 8 inputs were read at one instant" in "\n".join(seen)

        who = person.whoami().name
        person.approve(proposal_id, "approved by the test")
        rc = proc.wait(timeout=60)
        while (line := out.get(timeout=10)) is not None:
            seen.append(line)
        err = proc.stderr.read()
        assert rc == 0, f"exit {rc}\n" + "\n".join(seen) + "\n" + err
        outcome = json.loads(seen[-1])
        assert outcome == {
            "proposal": proposal_id,
            "status": "approved",
            "decided_by": who,
            "decided_at": person.proposal(proposal_id).proposal.decision.decided_at,
            "reason": "approved by the test",
        }
        audit = agent.audit(proposal_id)
        assert all(e.cited_rows_identical for e in audit.evidence)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_the_example_agent_says_so_when_nothing_is_short(url: str, agent_token: str, company: Company) -> None:
    company.shortage(on_hand=500, reserved=0)
    done = subprocess.run(
        [sys.executable, str(AGENT), "--url", url, "--token", agent_token, "--item", company.item, "--wait", "5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert last["proposal"] is None and last["status"] == "nothing to do"


def test_the_example_agent_needs_an_agents_token(url: str) -> None:
    without = {k: v for k, v in os.environ.items() if k != "LIVESTATE_TOKEN"}
    done = subprocess.run(
        [sys.executable, str(AGENT), "--url", url, "--wait", "5"], capture_output=True, text=True, timeout=60, env=without
    )
    assert done.returncode == 2 and "no token: give --token or set LIVESTATE_TOKEN" in done.stderr
    person = os.environ["LIVESTATE_PERSON_TOKEN"]
    done = subprocess.run(
        [sys.executable, str(AGENT), "--url", url, "--token", person, "--wait", "5"],
        capture_output=True, text=True, timeout=60, env=without,
    )
    assert done.returncode == 2 and "is not an agent" in done.stderr, done.stdout + done.stderr
