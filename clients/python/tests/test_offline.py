"""What a real server cannot be made to answer on demand (an internal error, a proxy's page, a
503 while polling), answered by a stand-in transport. Everything else runs against the real
server (test_client.py)."""

from __future__ import annotations

import json

import httpx
import pytest

from livestate_client import (
    AnswerError,
    Client,
    DecisionTimeout,
    InputError,
    InternalError,
    LivestateError,
    Unavailable,
    error_class,
)

ENTRY = {
    "id": "p1", "kind": "k", "agent": "a", "module": "procurement", "summary": "s", "risk_level": "low",
    "created_at": "2026-03-02T08:00:00Z", "created_offset": 3, "decision": None,
}
DOCUMENT = {
    "id": "p1", "agent": "a", "kind": "k", "module": "procurement", "summary": "s", "created_at": "2026-03-02T08:00:00Z",
    "action": {}, "sources": [], "rule": {"name": "r", "version": "1", "text": "t"}, "risk": {"level": "low"},
}


def client(handler) -> Client:
    return Client("http://livestate.test", "t", timeout=5, transport=httpx.MockTransport(handler))


def test_an_internal_error_carries_its_incident_and_not_its_cause() -> None:
    body = {"code": "internal", "message": "internal error (incident 42); see the server's log", "retryable": False, "incident": 42}
    with client(lambda req: httpx.Response(500, json=body)) as c:
        with pytest.raises(InternalError) as e:
            c.whoami()
    assert (e.value.status, e.value.code, e.value.incident, e.value.retryable) == (500, "internal", 42, False)
    assert "incident 42" in str(e.value)


def test_an_answer_that_is_not_the_apis_json_is_classed_by_its_status() -> None:
    with client(lambda req: httpx.Response(502, text="<html>bad gateway</html>")) as c:
        with pytest.raises(InternalError) as e:
            c.health()
    assert e.value.status == 502 and "bad gateway" in e.value.message
    with client(lambda req: httpx.Response(503, text="busy", headers={"Retry-After": "2"})) as c:
        with pytest.raises(Unavailable) as u:
            c.health()
    assert u.value.retryable and u.value.retry_after == 2.0 and u.value.code == "unavailable"
    with client(lambda req: httpx.Response(200, json={"name": "x"})) as c:
        with pytest.raises(AnswerError, match="not a WhoAmI"):
            c.whoami()


def test_every_code_maps_to_its_kind() -> None:
    assert issubclass(error_class("payload_too_large"), InputError)
    assert issubclass(error_class("too_many_requests"), Unavailable)
    assert error_class("a_code_from_the_future") is LivestateError


def test_waiting_rides_out_a_retryable_failure_and_gives_up_at_the_deadline() -> None:
    answers = iter(
        [
            httpx.Response(503, json={"code": "unavailable", "message": "stopping", "retryable": True}),
            httpx.Response(200, json={"proposal": dict(ENTRY, status="pending"), "document": DOCUMENT}),
            httpx.Response(200, json={"proposal": dict(ENTRY, status="approved", decision={
                "decision": "approved", "decided_by": "person:ana", "decided_at": "2026-03-02T09:00:00Z",
                "offset": 9, "reason": "ok"}), "document": DOCUMENT}),
        ]
    )
    seen = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append((req.method, req.url.path, req.headers["authorization"]))
        return next(answers)

    with client(handler) as c:
        entry = c.wait_for_decision("p1", timeout=10, poll_interval=0.01)
    assert entry.status == "approved" and entry.decision.decided_by == "person:ana"
    assert seen == [("GET", "/v1/proposals/p1", "Bearer t")] * 3

    pending = httpx.Response(200, json={"proposal": dict(ENTRY, status="pending"), "document": DOCUMENT})
    with client(lambda req: pending) as c:
        with pytest.raises(DecisionTimeout, match="still pending after 0.2 s"):
            c.wait_for_decision("p1", timeout=0.2, poll_interval=0.05)


def test_requests_carry_what_the_api_reads() -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        if req.url.path == "/v1/events":
            return httpx.Response(200, json={"appended": [{"line": 1, "offset": 0, "duplicate": False}]})
        return httpx.Response(200, json={
            "receipt": {"table": "stock", "snapshot_id": 1, "offset": 2}, "columns": ["item"], "rows": [{"item": "a b"}]})

    with client(handler) as c:
        c.rows("stock", {"item": "a b", "location": "nörth"}, where="on_hand < 5", limit=3)
        c.emit([{"id": "e1", "type": "inventory.stock_counted", "occurred_at": "2026-03-02T08:00:00Z", "data": {}}])
    q = dict(seen[0].url.params.multi_items())
    assert seen[0].url.path == "/v1/tables/stock/rows"
    assert q == {"item": "a b", "location": "nörth", "where": "on_hand < 5", "limit": "3"}
    assert seen[1].headers["content-type"] == "application/x-ndjson"
    assert json.loads(seen[1].content.decode().strip())["id"] == "e1"
