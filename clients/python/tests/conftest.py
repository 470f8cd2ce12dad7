"""Fixtures: clients of a real `livestate serve` given by the environment.

    LIVESTATE_URL            the server, e.g. http://127.0.0.1:7070 (example company spec)
    LIVESTATE_ADMIN_TOKEN    a token of `admin`
    LIVESTATE_AGENT_TOKEN    a token of an agent, e.g. `agent:procurement`
    LIVESTATE_PERSON_TOKEN   a token of a person whose scopes hold `procurement`
    LIVESTATE_MODULE_TOKEN   a token of `module:inventory`

Every test makes its own items, suppliers and event ids (with a per-run prefix), so the tests
can run again against the same server, and in any order.
"""

from __future__ import annotations

import os
import uuid
from typing import Any, Iterator

import pytest

from livestate_client import Client, ConsistentReadResult, EmitResult

ENV = {
    "url": "LIVESTATE_URL",
    "admin": "LIVESTATE_ADMIN_TOKEN",
    "agent": "LIVESTATE_AGENT_TOKEN",
    "person": "LIVESTATE_PERSON_TOKEN",
    "module": "LIVESTATE_MODULE_TOKEN",
}

TIMEOUT = 30.0


def _env(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        pytest.fail(
            f"{name} is not set: these tests run against a real `livestate serve` "
            f"(set {', '.join(ENV.values())}; see clients/python/README.md)",
            pytrace=False,
        )
    return value


@pytest.fixture(scope="session")
def url() -> str:
    return _env(ENV["url"]).rstrip("/")


def _client(url: str, which: str) -> Iterator[Client]:
    with Client(url, _env(ENV[which]), timeout=TIMEOUT) as c:
        yield c


@pytest.fixture(scope="session")
def admin(url: str) -> Iterator[Client]:
    yield from _client(url, "admin")


@pytest.fixture(scope="session")
def agent(url: str) -> Iterator[Client]:
    yield from _client(url, "agent")


@pytest.fixture(scope="session")
def person(url: str) -> Iterator[Client]:
    yield from _client(url, "person")


@pytest.fixture(scope="session")
def module(url: str) -> Iterator[Client]:
    yield from _client(url, "module")


@pytest.fixture(scope="session")
def agent_token() -> str:
    return _env(ENV["agent"])


@pytest.fixture(scope="session")
def run_id() -> str:
    """A prefix unique to this run."""
    return "py" + uuid.uuid4().hex[:10]


@pytest.fixture
def unique(run_id: str, request: pytest.FixtureRequest) -> str:
    """A name unique to this test in this run."""
    return f"{run_id}-{request.node.name.removeprefix('test_')[:40]}"


def event(eid: str, etype: str, **data: Any) -> dict[str, Any]:
    return {"id": eid, "type": etype, "occurred_at": "2026-03-02T08:00:00Z", "data": data}


class Company:
    """The example company's events for one item at one location, supplied by two suppliers."""

    def __init__(self, admin: Client, prefix: str) -> None:
        self.admin = admin
        self.item = f"{prefix}-bolt"
        self.location = "north"
        self.supplier = f"{prefix}-acme"  # low risk, pack of 10
        self.other = f"{prefix}-zeta"  # high risk, cheaper
        self.prefix = prefix

    def shortage(self, on_hand: int = 20, reserved: int = 5, reorder_point: int = 40, target: int = 100) -> EmitResult:
        """available = on_hand - reserved < reorder_point: a shortage of `item` at `location`."""
        p, item, loc = self.prefix, self.item, self.location
        return self.admin.emit(
            [
                event(f"{p}-count", "inventory.stock_counted", item=item, location=loc, on_hand=on_hand),
                event(f"{p}-plan", "procurement.planning_set", item=item, location=loc, reorder_point=reorder_point, target=target),
                event(f"{p}-resv", "commerce.reservation_changed", item=item, location=loc, reserved=reserved),
                event(f"{p}-offer1", "procurement.supplier_item_listed", supplier=self.supplier, item=item, pack_size=10, unit_price="1.50", lead_time_days=2),
                event(f"{p}-offer2", "procurement.supplier_item_listed", supplier=self.other, item=item, pack_size=1, unit_price="0.50", lead_time_days=2),
                event(f"{p}-risk1", "procurement.supplier_risk_assessed", supplier=self.supplier, level="low"),
                event(f"{p}-risk2", "procurement.supplier_risk_assessed", supplier=self.other, level="high", reason="late deliveries"),
            ]
        )

    def read(self, client: Client) -> ConsistentReadResult:
        """The item's stock row, its offers and its suppliers' risk, at one offset."""
        return client.consistent_read(
            [
                {"table": "stock", "keys": {"item": self.item, "location": self.location}},
                {"table": "supplier_items", "keys": {"item": self.item, "supplier": self.supplier}},
                {"table": "supplier_risk", "keys": {"supplier": self.supplier}},
            ]
        )


@pytest.fixture
def company(admin: Client, unique: str) -> Company:
    return Company(admin, unique)
