#!/usr/bin/env python3
"""An example procurement agent on the livestate Python client.

It reads, in one consistent read (every table as of one record offset, each with a receipt),
the `stock` rows whose available stock (on_hand - reserved + inbound) is below their reorder
point, the suppliers' offers (`supplier_items`) and their risk (`supplier_risk`). For the first
shortage it orders `target - available`, rounded up to the pack size of the lowest-risk
supplier carrying the item (then the cheapest, then by name), and proposes a
`stock_replenishment` decision citing a receipt for every input the kind declares (read from
`GET /v1/decision-kinds`, so a new input in the spec is cited without changing this file).
Then it waits for a person's decision and prints it.

    procurement_agent.py --url http://127.0.0.1:7070 --token $AGENT_TOKEN [--item bolt]

--url and --token default to $LIVESTATE_URL and $LIVESTATE_TOKEN. Output: one line per step;
the last line is the outcome as JSON. Exit codes: 0 decided (or nothing to do), 1 a failure
of the server or the network, 2 bad input (arguments, token, refused proposal), 3 no
decision within --wait seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from decimal import Decimal, InvalidOperation
from typing import Any, Optional

from livestate_client import (
    Client,
    DecisionTimeout,
    InputError,
    KindDoc,
    LivestateError,
    NewProposal,
    Risk,
    Rule,
    Source,
)
from livestate_client.models import ConsistentReadResult, Row

KIND = "stock_replenishment"
MODULE = "procurement"
AVAILABLE = "coalesce(on_hand, 0) - coalesce(reserved, 0) + coalesce(inbound, 0)"
RISK_RANK = {"low": 0, "medium": 1, "high": 2}


def say(*parts: Any) -> None:
    print(*parts, flush=True)


def quoted(value: str) -> str:
    """A string literal of the spec's expression language."""
    return "'" + value.replace("'", "''") + "'"


def num(row: Optional[Row], col: str) -> int:
    v = (row or {}).get(col)
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else 0


def price(row: Row) -> Decimal:
    try:
        return Decimal(str(row.get("unit_price")))
    except InvalidOperation:
        return Decimal("Infinity")


def read_everything(client: Client, item: Optional[str], location: Optional[str]) -> ConsistentReadResult:
    """One consistent read: the shortages, the offers and the suppliers' risk at one offset."""
    short = f"{AVAILABLE} < reorder_point"
    offers_where = None
    if item is not None:
        short += f" and item == {quoted(item)}"
        offers_where = f"item == {quoted(item)}"
    if location is not None:
        short += f" and location == {quoted(location)}"
    return client.consistent_read(
        [
            {"table": "stock", "where": short},
            {"table": "supplier_items", "where": offers_where},
            {"table": "supplier_risk"},
        ]
    )


def choose_offer(item: str, offers: list[Row], risks: list[Row]) -> Optional[Row]:
    level = {r.get("supplier"): r.get("level") for r in risks}
    carrying = [o for o in offers if o.get("item") == item and num(o, "pack_size") > 0]
    if not carrying:
        return None
    return min(carrying, key=lambda o: (RISK_RANK.get(level.get(o["supplier"]), 3), price(o), o["supplier"]))


def cite_every_input(kind: KindDoc, action: dict[str, Any], read: ConsistentReadResult) -> list[Source]:
    """A source per table the kind's inputs read: the row holding each input (located by the
    input's key, whose values are action fields), or the key itself when there is no row."""
    cited: dict[str, tuple[list[Row], list[Row]]] = {}
    for inp in kind.inputs:
        try:
            result = read.table(inp.table)
        except KeyError:
            raise SystemExit(f"input `{inp.name}` of kind `{kind.name}` reads table `{inp.table}`, which this agent does not read")
        missing = [f for f in inp.key.values() if f not in action]
        if missing:
            raise SystemExit(f"input `{inp.name}` is keyed by action field(s) {missing} the action does not hold")
        key = {col: action[field] for col, field in inp.key.items()}
        rows, keys = cited.setdefault(inp.table, ([], []))
        row = next((r for r in result.rows if all(r.get(c) == v for c, v in key.items())), None)
        if row is not None:
            if row not in rows:
                rows.append(row)
        elif key not in keys:
            keys.append(key)
    return [Source.of(read.table(t), rows=rows or None, keys=keys or None) for t, (rows, keys) in cited.items()]


def find_pending(client: Client, agent: Optional[str], item: str, location: str) -> Optional[str]:
    """This agent's pending proposal of the kind for the item and location, if any."""
    for entry in client.proposals(status="pending"):
        if entry.agent == agent and entry.kind == KIND:
            action = client.proposal(entry.id).document.action
            if action.get("item") == item and action.get("location") == location:
                return entry.id
    return None


def run(args: argparse.Namespace) -> int:
    with Client(args.url, args.token, timeout=args.timeout) as client:
        me = client.whoami()
        if me.role.kind != "agent":
            print(f"error: {me.name} is not an agent: proposals need an agent's token", file=sys.stderr, flush=True)
            return 2
        kind = client.decision_kinds().kind(KIND)
        read = read_everything(client, args.item, args.location)
        for r in read.results:
            rc = r.receipt
            say(
                f"read {rc.table}: {len(r.rows)} row(s) at snapshot {rc.snapshot_id}, "
                f"offset {rc.offset}, committed {rc.committed_at}, served by {rc.served_by}"
            )
        stock = read.table("stock").rows
        offers = read.table("supplier_items").rows
        risks = read.table("supplier_risk").rows
        shortage = None
        for row in stock:
            available = num(row, "on_hand") - num(row, "reserved") + num(row, "inbound")
            if row.get("reorder_point") is not None and num(row, "target") > available:
                offer = choose_offer(row["item"], offers, risks)
                if offer is not None:
                    shortage = (row, available, offer)
                    break
                say(f"{row['item']} at {row['location']} is short but no supplier carries it")
        if shortage is None:
            say(json.dumps({"proposal": None, "status": "nothing to do", "offset": read.offset}))
            return 0
        row, available, offer = shortage
        item, location, supplier = row["item"], row["location"], offer["supplier"]
        pack = num(offer, "pack_size")
        qty = math.ceil((num(row, "target") - available) / pack) * pack
        say(
            f"short: {item} at {location}: available {available} < reorder point {row['reorder_point']}; "
            f"order {qty} from {supplier} (pack {pack}, unit price {offer.get('unit_price')})"
        )
        action = {"item": item, "location": location, "supplier": supplier, "qty": qty}
        level = next((r.get("level") for r in risks if r.get("supplier") == supplier), None)
        value = price(offer) * qty
        proposal = NewProposal(
            kind=kind.name,
            module=kind.module,
            summary=f"Order {qty} x {item} from {supplier} for {location}",
            action=action,
            sources=cite_every_input(kind, action, read),
            rule=Rule(
                name="order-up-to-target",
                version="1",
                text="Where on_hand - reserved + inbound is below the reorder point, order target minus that, "
                "rounded up to the pack size of the lowest-risk supplier carrying the item (then cheapest).",
                parameters={"pack_size": pack},
            ),
            risk=Risk(
                level=level if level in RISK_RANK else "high",
                reasons=[f"supplier {supplier} is rated {level or 'unknown'} risk", f"order value {value}"],
            ),
            idempotency_key=f"{item}@{location}@{read.offset}",
        )
        pending = find_pending(client, me.role.agent, item, location)
        if pending is not None:
            # One pending proposal per item and location: wait for that one instead.
            say(f"already pending {pending}: a proposal for {item} at {location}")
            created_id = pending
        else:
            created = client.propose(proposal)
            created_id = created.id
            say(f"proposed {created.id}: {proposal.summary} (offset {created.offset}, {len(created.tags or [])} tag(s))")
        sheet = client.sheet(created_id)
        say(f"sheet: {sheet.summary}; {sheet.verdict.text}")
        say(f"waiting up to {args.wait:g} s for a person's decision on {created_id}")
        try:
            entry = client.wait_for_decision(created_id, timeout=args.wait, poll_interval=args.poll)
        except DecisionTimeout as e:
            say(json.dumps({"proposal": created_id, "status": "pending", "error": e.message}))
            return 3
        d = entry.decision
        say(
            json.dumps(
                {
                    "proposal": entry.id,
                    "status": entry.status,
                    "decided_by": d.decided_by if d else None,
                    "decided_at": d.decided_at if d else None,
                    "reason": d.reason if d else None,
                }
            )
        )
        return 0


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default=os.environ.get("LIVESTATE_URL"), help="server URL (default $LIVESTATE_URL)")
    p.add_argument("--token", default=os.environ.get("LIVESTATE_TOKEN"), help="an agent's token (default $LIVESTATE_TOKEN)")
    p.add_argument("--item", help="only this item")
    p.add_argument("--location", help="only this location")
    p.add_argument("--wait", type=float, default=300.0, help="seconds to wait for the decision (default 300)")
    p.add_argument("--poll", type=float, default=0.5, help="seconds between polls (default 0.5)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds each call may take (default 30)")
    args = p.parse_args(argv)
    if not args.url:
        p.error("no server: give --url or set LIVESTATE_URL")
    if not args.token:
        p.error("no token: give --token or set LIVESTATE_TOKEN")
    if args.wait <= 0 or args.poll <= 0 or args.timeout <= 0:
        p.error("--wait, --poll and --timeout must be positive")
    try:
        return run(args)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    except LivestateError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
