"""The client against a real `livestate serve` (see conftest.py for the environment)."""

from __future__ import annotations

import pytest
from conftest import Company, event

from livestate_client import (
    Client,
    ClientInputError,
    Conflict,
    DecisionTimeout,
    Event,
    Forbidden,
    InputError,
    LivestateError,
    NewProposal,
    NotFound,
    Risk,
    Rule,
    TransportError,
    Unauthenticated,
    Unavailable,
)


def proposal_for(c: Company, read, *, key: str, qty: int = 90, sources=None) -> NewProposal:
    return NewProposal(
        kind="stock_replenishment",
        module="procurement",
        summary=f"Order {qty} x {c.item} from {c.supplier} for {c.location}",
        action={"item": c.item, "location": c.location, "supplier": c.supplier, "qty": qty},
        sources=sources
        if sources is not None
        else [read.table("stock").cite(), read.table("supplier_items").cite(), read.table("supplier_risk").cite()],
        rule=Rule(name="order-up-to-target", version="1", text="order target - available, in packs", parameters={"target": 100}),
        risk=Risk(level="low", reasons=["supplier rated low risk"]),
        idempotency_key=key,
    )


# -- health and identity ---------------------------------------------------------------------


def test_health_answers_ok_with_the_records_next_offset(url: str) -> None:
    with Client(url) as anonymous:  # health needs no token
        h = anonymous.health()
    assert h.status == "ok"
    assert isinstance(h.record_next_offset, int) and h.record_next_offset >= 0
    for store in (h.stores.record, h.stores.index, h.stores.proposals):
        assert store.block_cache_capacity_bytes > 0 and store.block_cache_bytes <= store.block_cache_capacity_bytes


def test_whoami_names_each_tokens_principal_and_role(admin: Client, agent: Client, person: Client, module: Client) -> None:
    assert admin.whoami().role.kind == "admin"
    a = agent.whoami()
    assert a.role.kind == "agent" and a.name == f"agent:{a.role.agent}"
    p = person.whoami()
    assert p.role.kind == "person" and p.name == f"person:{p.role.person}"
    assert "procurement" in (p.role.scopes or []) or "*" in (p.role.scopes or [])
    m = module.whoami()
    assert (m.name, m.role.kind, m.role.module) == ("module:inventory", "module", "inventory")


# -- events ----------------------------------------------------------------------------------


def test_emit_gives_each_line_an_offset_and_a_resend_is_a_duplicate(module: Client, unique: str) -> None:
    events = [
        event(f"{unique}-1", "inventory.stock_counted", item=f"{unique}-nut", location="north", on_hand=7),
        event(f"{unique}-2", "inventory.stock_counted", item=f"{unique}-nut", location="south", on_hand=9),
    ]
    first = module.emit(events)
    assert [a.line for a in first.appended] == [1, 2]
    assert [a.duplicate for a in first.appended] == [False, False]
    assert first.appended[1].offset == first.appended[0].offset + 1
    again = module.emit(events)
    assert [a.duplicate for a in again.appended] == [True, True]
    assert [a.offset for a in again.appended] == [a.offset for a in first.appended]


def test_emit_takes_ndjson_text_too(module: Client, unique: str) -> None:
    text = (
        '{"id":"%s","type":"inventory.stock_counted","occurred_at":"2026-03-02T08:00:00Z",'
        '"data":{"item":"%s","location":"east","on_hand":3}}\n' % (unique, unique)
    )
    out = module.emit(text)
    assert len(out.appended) == 1 and out.appended[0].duplicate is False
    typed = Event(id=f"{unique}-typed", type="inventory.stock_counted", occurred_at="2026-03-02T08:00:00Z",
                  data={"item": unique, "location": "east", "on_hand": 4})
    again = module.emit([typed])
    assert again.appended[0].offset > out.appended[0].offset and again.appended[0].duplicate is False


def test_a_bad_event_is_an_input_error_naming_the_field_and_nothing_is_appended(module: Client, unique: str) -> None:
    good = event(f"{unique}-good", "inventory.stock_counted", item=unique, location="north", on_hand=1)
    bad = event(f"{unique}-bad", "inventory.stock_counted", item=unique, location="north")  # no on_hand
    with pytest.raises(InputError) as e:
        module.emit([good, bad])
    err = e.value
    assert (err.code, err.status, err.retryable) == ("bad_request", 400, False)
    assert "line 2" in err.message and f"{unique}-bad" in err.message
    assert "data.on_hand" in err.message and "missing" in err.message
    # One bad line rejects all: the good line was not appended.
    assert module.emit([good]).appended[0].duplicate is False


def test_an_unknown_event_type_is_named(module: Client, unique: str) -> None:
    with pytest.raises(InputError) as e:
        module.emit([event(unique, "inventory.nothing_like_this", item="x")])
    assert "unknown event type `inventory.nothing_like_this`" in e.value.message


def test_an_id_resent_with_other_content_is_a_conflict(module: Client, unique: str) -> None:
    module.emit([event(unique, "inventory.stock_counted", item=unique, location="north", on_hand=5)])
    with pytest.raises(Conflict) as e:
        module.emit([event(unique, "inventory.stock_counted", item=unique, location="north", on_hand=6)])
    err = e.value
    assert (err.code, err.status, err.retryable) == ("conflict", 409, False)
    assert f"`{unique}`" in err.message and "different content" in err.message


def test_a_module_may_not_emit_another_modules_events(module: Client, unique: str) -> None:
    with pytest.raises(Forbidden) as e:
        module.emit([event(unique, "procurement.planning_set", item=unique, location="north", reorder_point=1, target=2)])
    assert (e.value.code, e.value.status) == ("forbidden", 403)
    assert "emit:procurement" in e.value.message


# -- reads -----------------------------------------------------------------------------------


def test_rows_come_with_a_receipt(admin: Client, agent: Client, company: Company) -> None:
    emitted = company.shortage(on_hand=20, reserved=5)
    last = max(a.offset for a in emitted.appended)
    # A consistent read commits the tables it reads; a plain read then sees that snapshot.
    committed = company.read(agent).table("stock").receipt
    got = agent.rows("stock", {"item": company.item, "location": company.location})
    r = got.receipt
    assert r.table == "stock"
    assert r.snapshot_id is not None and r.snapshot_id >= committed.snapshot_id
    assert r.offset is not None and r.offset > last
    assert r.committed_at and r.budget == "5m" and r.served_by in ("index", "paimon")
    assert r.measured_by == "record"
    assert "on_hand" in got.columns and got.columns[:2] == ["item", "location"]
    assert len(got.rows) == 1
    row = got.rows[0]
    assert (row["item"], row["location"], row["on_hand"], row["reserved"], row["inbound"]) == (
        company.item, company.location, 20, 5, None,
    )
    assert (row["reorder_point"], row["target"]) == (40, 100)
    # A where= condition and a limit.
    short = agent.rows(
        "stock", where=f"item == '{company.item}' and coalesce(on_hand, 0) - coalesce(reserved, 0) < reorder_point"
    )
    assert [x["item"] for x in short.rows] == [company.item]
    assert agent.rows("stock", {"item": company.item}, where="on_hand > 1000").rows == []
    assert len(agent.rows("supplier_items", {"item": company.item}, limit=1).rows) == 1
    # Time travel to the snapshot read.
    past = agent.rows("stock", {"item": company.item}, snapshot=r.snapshot_id)
    assert past.receipt.snapshot_id == r.snapshot_id and past.receipt.measured_by == "snapshot"
    assert past.rows == got.rows


def test_a_consistent_read_answers_every_table_at_one_offset(agent: Client, company: Company) -> None:
    emitted = company.shortage()
    last = max(a.offset for a in emitted.appended)
    read = company.read(agent)
    assert read.offset > last
    assert [r.receipt.table for r in read.results] == ["stock", "supplier_items", "supplier_risk"]
    for r in read.results:
        assert r.receipt.offset == read.offset, r.receipt
        assert r.receipt.snapshot_id is not None
    assert read.table("stock").rows[0]["on_hand"] == 20
    offer = read.table("supplier_items").rows[0]
    assert (offer["supplier"], offer["pack_size"], offer["unit_price"]) == (company.supplier, 10, "1.50")
    assert read.table("supplier_risk").rows[0]["level"] == "low"
    with pytest.raises(KeyError, match="open_orders"):
        read.table("open_orders")


def test_tables_list_every_table_with_its_receipt(agent: Client) -> None:
    tables = {t.name: t for t in agent.tables()}
    assert {"stock", "supplier_items", "supplier_risk", "approval_inbox"} <= set(tables)
    assert tables["stock"].merge_engine == "partial-update"
    assert tables["stock"].receipt.budget == "5m"
    schema = agent.schema("stock")
    assert schema.primary_key == ["item", "location"]
    assert [c.name for c in schema.columns if c.key] == ["item", "location"]


def test_an_unknown_table_is_not_found(agent: Client) -> None:
    with pytest.raises(NotFound) as e:
        agent.rows("no_such_table")
    err = e.value
    assert (err.code, err.status, err.retryable) == ("not_found", 404, False)
    assert "unknown table `no_such_table`" in err.message
    with pytest.raises(NotFound):
        agent.consistent_read([{"table": "no_such_table"}])


def test_a_bad_condition_is_an_input_error_naming_it(agent: Client) -> None:
    with pytest.raises(InputError) as e:
        agent.rows("stock", where="on_hand <")
    assert e.value.code == "bad_request" and "on_hand <" in e.value.message


def test_an_unknown_token_is_unauthenticated(url: str) -> None:
    with Client(url, "lst_not_a_token") as stranger:
        with pytest.raises(Unauthenticated) as e:
            stranger.whoami()
    assert (e.value.code, e.value.status) == ("unauthenticated", 401)


def test_arguments_the_client_cannot_send_are_named_before_sending(url: str, agent: Client) -> None:
    with pytest.raises(ClientInputError, match="base URL"):
        Client("localhost:7070", "t")
    with pytest.raises(ValueError, match="timeout"):
        Client(url, "t", timeout=0)
    with pytest.raises(ClientInputError, match="`limit` is a parameter"):
        agent.rows("stock", {"limit": 3})
    with pytest.raises(ClientInputError, match="key `item`"):
        agent.rows("stock", {"item": None})
    with pytest.raises(ClientInputError, match="approve' or 'reject"):
        agent.decide("p0", "maybe", "why not")
    with pytest.raises(ClientInputError, match="risk.level"):
        agent.propose({"kind": "k", "module": "procurement", "summary": "s", "action": {}, "sources": [],
                       "rule": {"name": "r", "version": "1", "text": "t"}, "risk": {"level": "extreme"}})
    with pytest.raises(ClientInputError, match=r"events\[1\]"):
        agent.emit([{"id": "a"}, 42])


def test_a_server_that_is_not_there_is_a_retryable_transport_error() -> None:
    with Client("http://127.0.0.1:9", "t", timeout=2) as nowhere:
        with pytest.raises(TransportError) as e:
            nowhere.health()
    assert isinstance(e.value, Unavailable) and e.value.retryable and e.value.status is None


# -- proposals, decisions, sheets, audits ----------------------------------------------------


def test_propose_decide_sheet_audit_and_outbox(admin: Client, agent: Client, person: Client, company: Company, unique: str) -> None:
    company.shortage(on_hand=20, reserved=5)
    read = company.read(agent)
    proposal = proposal_for(company, read, key=unique)
    created = agent.propose(proposal)
    assert created.id.startswith("p") and created.status == "pending"
    assert sorted(t.table for t in created.tags or []) == ["stock", "supplier_items", "supplier_risk"]
    stock_snapshot = read.table("stock").receipt.snapshot_id
    assert any(t.table == "stock" and t.snapshot_id == stock_snapshot for t in created.tags or [])
    # The same idempotency key again names the same proposal; with other content it conflicts.
    assert agent.propose(proposal).id == created.id
    with pytest.raises(Conflict, match=unique):
        agent.propose(proposal_for(company, read, key=unique, qty=91))

    me = agent.whoami().role.agent
    pending = agent.proposals(status="pending")
    entry = next(p for p in pending if p.id == created.id)
    assert (entry.agent, entry.kind, entry.module, entry.risk_level, entry.status) == (
        me, "stock_replenishment", "procurement", "low", "pending",
    )
    detail = agent.proposal(created.id)
    assert detail.document.action == {"item": company.item, "location": company.location, "supplier": company.supplier, "qty": 90}
    assert {s.table: s.tag for s in detail.document.sources} == {t.table: t.tag for t in created.tags or []}

    sheet = agent.sheet(created.id)
    assert sheet.proposal_id == created.id and sheet.status == "pending"
    values = {i.name: i.value for i in sheet.inputs}
    assert values == {
        "on_hand": 20, "reserved": 5, "inbound": None, "reorder_point": 40, "target": 100,
        "pack_size": 10, "unit_price": "1.50", "supplier_risk": "low",
    }
    assert sheet.input("on_hand").snapshot_id == stock_snapshot
    assert sheet.input("on_hand").offset == read.offset
    assert sheet.step("available").value == 15
    assert sheet.step("below_reorder_point").value is True
    assert sheet.step("value").value == "135.00"
    assert sheet.verdict.one_instant is True and sheet.verdict.offset_spread == 0
    assert sheet.summary == f"Order 90 x {company.item} from {company.supplier} for north: available 15 < reorder point 40"

    # Agents may not decide; a person in scope does.
    with pytest.raises(Forbidden, match="decide:procurement"):
        agent.approve(created.id, "agents do not decide")
    who = person.whoami().name
    decided = person.approve(created.id, "stock is short, supplier low risk")
    assert (decided.id, decided.status, decided.decided_by) == (created.id, "approved", who)
    assert decided.offset > created.offset
    with pytest.raises(Conflict) as again:
        person.reject(created.id, "changed my mind")
    assert f"already approved by {who}" in again.value.message

    done = agent.wait_for_decision(created.id, timeout=10)
    assert done.status == "approved" and done.decision is not None
    assert (done.decision.decision, done.decision.decided_by, done.decision.reason) == (
        "approved", who, "stock is short, supplier low risk",
    )
    assert done.decision.offset == decided.offset

    audit = agent.audit(created.id)
    assert audit.status == "approved" and audit.created_offset == created.offset
    assert audit.decision is not None and audit.decision.decided_by == who
    assert [e.table for e in audit.evidence] == ["stock", "supplier_items", "supplier_risk"]
    for ev in audit.evidence:
        assert ev.cited_rows_identical, ev
        assert ev.rows_at_tag == ev.cited_rows
        assert ev.receipt_at_tag is not None and ev.receipt_at_tag.snapshot_id == ev.snapshot_id
    assert audit.proposal.id == created.id
    assert {s.table for s in audit.state_after} >= {"stock"}

    item = next(i for i in admin.outbox("procurement").items if i.proposal_id == created.id)
    assert (item.decided_by, item.action["qty"], item.cursor) == (who, 90, decided.offset)


def test_a_proposal_missing_a_declared_input_is_refused_naming_it(agent: Client, company: Company, unique: str) -> None:
    company.shortage()
    read = company.read(agent)
    p = proposal_for(company, read, key=unique, sources=[read.table("stock").cite(), read.table("supplier_risk").cite()])
    with pytest.raises(InputError) as e:
        agent.propose(p)
    assert e.value.code == "bad_request"
    assert "input `pack_size` of kind `stock_replenishment`" in e.value.message and "is not cited" in e.value.message
    # A cited row that is not what the snapshot holds is named too.
    wrong = dict(read.table("stock").rows[0], on_hand=21)
    p = proposal_for(company, read, key=unique + "-2", sources=[
        read.table("stock").cite(rows=[wrong]), read.table("supplier_items").cite(), read.table("supplier_risk").cite()])
    with pytest.raises(InputError, match="is not what `stock` holds"):
        agent.propose(p)


def test_waiting_for_a_decision_times_out_then_sees_a_rejection(agent: Client, person: Client, company: Company, unique: str) -> None:
    company.shortage()
    created = agent.propose(proposal_for(company, company.read(agent), key=unique))
    with pytest.raises(DecisionTimeout) as e:
        agent.wait_for_decision(created.id, timeout=1.0, poll_interval=0.2)
    assert e.value.retryable and created.id in e.value.message
    assert isinstance(e.value, LivestateError) and isinstance(e.value, TimeoutError)
    person.reject(created.id, "not now")
    done = agent.wait_for_decision(created.id, timeout=10)
    assert done.status == "rejected" and done.decision.reason == "not now"


def test_an_unknown_proposal_is_not_found(agent: Client) -> None:
    for call in (agent.proposal, agent.sheet, agent.audit):
        with pytest.raises(NotFound, match="p_no_such"):
            call("p_no_such")


def test_decision_kinds_declare_the_inputs_to_cite(agent: Client) -> None:
    kind = agent.decision_kinds().kind("stock_replenishment")
    assert kind.module == "procurement"
    assert set(kind.action) == {"item", "location", "supplier", "qty"}
    assert [i.name for i in kind.inputs] == [
        "on_hand", "reserved", "inbound", "reorder_point", "target", "pack_size", "unit_price", "supplier_risk",
    ]
    assert kind.inputs[-1].table == "supplier_risk" and kind.inputs[-1].key == {"supplier": "supplier"}
    h = agent.history("stock_replenishment", since="1d")
    assert h.kind == "stock_replenishment" and h.proposals >= h.approved + h.rejected
    with pytest.raises(InputError, match="since"):
        agent.history("stock_replenishment", since="forever")
