"""The API's answers and request bodies as pydantic models.

Answers tolerate fields they do not declare (a newer server may add some: they are kept, in
``model_extra``); request bodies refuse them, as the server does. Timestamps are kept as the
server's strings. Row values are the API's JSON: integers, strings (decimals and timestamps
too), booleans or ``None``.

Where ``/v1/openapi.json`` has a component schema for a shape, the model of that shape is
listed in ``tests/test_openapi.py`` and checked against it; the answers the document leaves
untyped (audit, a new proposal) are checked against real answers
there.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

Row = dict[str, Any]
"""One row: column name → value."""


class Answer(BaseModel):
    """Base of every answer model: unknown fields are kept, not refused."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Body(BaseModel):
    """Base of every request body: unknown fields are refused (the server refuses them too)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# ---------------------------------------------------------------------------------------------
# Errors


class ErrorBody(Answer):
    """Every error answer's body (schema ``Error``)."""

    code: str
    message: str
    retryable: bool
    incident: Optional[int] = None


# ---------------------------------------------------------------------------------------------
# Health and identity


class StoreMemory(Answer):
    """What one embedded store holds in memory: block cache and unflushed writes, in bytes."""

    block_cache_bytes: int
    block_cache_capacity_bytes: int
    write_buffer_bytes: int
    queued_flushes: int
    journals: int


class Stores(Answer):
    """Each embedded store's memory."""

    record: StoreMemory
    index: StoreMemory
    proposals: StoreMemory


class Health(Answer):
    """``GET /v1/health``: ``status`` is ``ok``, or ``refusing_appends`` (with ``error``, answered
    with 503) after a write of the record failed."""

    status: Literal["ok", "refusing_appends"]
    record_next_offset: int
    stores: Stores
    heap_live_bytes: Optional[int] = None
    error: Optional[str] = None


class Role(Answer):
    """A principal's role; which of ``agent``, ``person``, ``module``, ``scopes`` are set
    depends on ``kind`` (``admin``, ``agent``, ``person``, ``module``)."""

    kind: str
    agent: Optional[str] = None
    person: Optional[str] = None
    module: Optional[str] = None
    scopes: Optional[list[str]] = None


class WhoAmI(Answer):
    """``GET /v1/whoami``."""

    name: str
    role: Role


class Principal(Answer):
    """One principal as administrators see it (never its token)."""

    name: str
    scopes: list[str] = Field(default_factory=list)
    created_at: Optional[str] = None


class Principals(Answer):
    """``GET /v1/principals`` (administrators only)."""

    principals: list[Principal]


# ---------------------------------------------------------------------------------------------
# Reads with receipts


class Receipt(Answer):
    """What a read reflects: the table's snapshot (``None`` before its first commit), the
    record offset below which every event is reflected, when it was committed, its lag
    against the freshness budget and who answered (``index`` or ``paimon``)."""

    table: str
    snapshot_id: Optional[int] = None
    offset: Optional[int] = None
    committed_at: Optional[str] = None
    lag_ms: Optional[int] = None
    budget: Optional[str] = None
    within_budget: Optional[bool] = None
    measured_by: Optional[str] = None
    served_by: Optional[str] = None


class TableRows(Answer):
    """``GET /v1/tables/{t}/rows`` and each result of a consistent read."""

    receipt: Receipt
    columns: list[str]
    rows: list[Row]

    def cite(self, rows: Optional[list[Row]] = None, keys: Optional[list[Row]] = None) -> "Source":
        """A source citing this read: its receipt and ``rows`` (default: every row read) or
        ``keys``. See :meth:`Source.of`."""
        return Source.of(self, rows=self.rows if rows is None and keys is None else rows, keys=keys)


class TableRead(Body):
    """One table of a consistent read (schema ``TableRead``)."""

    table: str
    keys: Optional[dict[str, Any]] = None
    where: Optional[str] = None
    limit: Optional[int] = None


class ConsistentRead(Body):
    """The body of ``POST /v1/reads`` (schema ``ConsistentRead``)."""

    tables: list[TableRead]


class ConsistentReadResult(Answer):
    """``POST /v1/reads``: every table as of one record offset."""

    offset: int
    results: list[TableRows]

    def table(self, name: str) -> TableRows:
        """The result of table ``name``."""
        for r in self.results:
            if r.receipt.table == name:
                return r
        raise KeyError(f"table `{name}` is not in this read (read: {', '.join(r.receipt.table for r in self.results)})")


class BucketHealth(Answer):
    """One bucket of a table's latest snapshot."""

    bucket: int
    files: int
    sorted_runs: int
    files_per_level: list[int]
    bytes: int
    rows: int


class TagInfo(Answer):
    """A tag and the snapshot it pins."""

    name: str
    snapshot_id: int


class TableHealth(Answer):
    """A table's snapshots, tags and files per bucket."""

    latest_snapshot: Optional[int] = None
    earliest_snapshot: Optional[int] = None
    snapshots: int
    buckets: list[BucketHealth]
    tags: list[TagInfo]


class Spend(Answer):
    """What one table spent in some span of time."""

    commits: int
    compactions: int
    files_written: int
    bytes_written: int
    busy_ms: int
    cpu_us: int = 0
    derive_cpu_us: int = 0


class TableSpend(Answer):
    """A table's spend over the last hour and since ``since_ms``."""

    last_hour: Spend
    total: Spend
    since_ms: int


class Quarantined(Answer):
    """A row operation the derivers set aside because its derivation failed."""

    table: str
    offset: int
    event_id: str
    event_type: str
    message: str


class QuarantineList(Answer):
    """``GET /v1/quarantine``: the latest quarantined row operations, oldest first."""

    entries: list[Quarantined]


class TableInfo(Answer):
    """One table of ``GET /v1/tables``: merge engine, buckets, receipt, LSM health, spend."""

    name: str
    merge_engine: str
    buckets: str
    derived_by: str
    receipt: Receipt
    health: TableHealth
    quarantined: int = 0
    last_quarantined: Optional[Quarantined] = None
    spend: Optional[TableSpend] = None
    total_rows_in_files: Optional[int] = None


class SchemaColumn(Answer):
    name: str
    type: str
    key: bool


class TableSchema(Answer):
    """``GET /v1/tables/{t}/schema``."""

    table: str
    columns: list[SchemaColumn]
    primary_key: list[str]
    merge_engine: Optional[str] = None
    budget: Optional[str] = None
    description: Optional[str] = None
    options: dict[str, Any] = Field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Events


class Event(Body):
    """One event line: ``occurred_at`` in UTC (``2026-03-02T08:00:00Z``)."""

    id: str
    type: str
    occurred_at: str
    data: dict[str, Any]
    causation: Optional[str] = None


class Appended(Answer):
    """One line of ``POST /v1/events``: its offset, and whether the id was already recorded
    with the same content (then nothing was appended)."""

    line: int
    offset: int
    duplicate: bool


class EmitResult(Answer):
    """``POST /v1/events``."""

    appended: list[Appended]


# ---------------------------------------------------------------------------------------------
# Triggers


class Firing(Answer):
    """A trigger firing: the row before and after it crossed into the condition."""

    trigger: str
    table: str
    seq: int
    key: Row
    offset: int
    snapshot_id: Optional[int] = None
    before: Optional[Row] = None
    after: Optional[Row] = None
    fired_at_ms: Optional[int] = None


class Firings(Answer):
    """``GET /v1/triggers/{t}/firings``."""

    consumer: str
    firings: list[Firing]


# ---------------------------------------------------------------------------------------------
# Proposals


class Source(Body):
    """A cited source (schema ``Source``): a snapshot the agent read, and the rows (or some
    of their columns, key columns included) or keys it used."""

    table: str
    snapshot_id: int
    offset: Optional[int] = None
    lag_ms: Optional[int] = None
    committed_at: Optional[str] = None
    keys: Optional[list[Row]] = None
    rows: Optional[list[Row]] = None

    @classmethod
    def of(cls, read: TableRows, rows: Optional[list[Row]] = None, keys: Optional[list[Row]] = None) -> "Source":
        """Cites ``read``'s receipt with ``rows`` and/or ``keys``.

        Raises :class:`~livestate_client.ClientInputError` when the table had no snapshot
        when read (nothing to cite yet: a consistent read commits the tables it reads)."""
        from .errors import ClientInputError

        r = read.receipt
        if r.snapshot_id is None:
            raise ClientInputError(
                f"table `{r.table}` had no committed snapshot when read, so its receipt cannot be cited; "
                "read it with consistent_read(), which commits every table it reads"
            )
        return cls(
            table=r.table,
            snapshot_id=r.snapshot_id,
            offset=r.offset,
            lag_ms=r.lag_ms,
            committed_at=r.committed_at,
            rows=list(rows) if rows is not None else None,
            keys=list(keys) if keys is not None else None,
        )


class Rule(Body):
    """The rule an agent applied (schema ``Rule``)."""

    name: str
    version: str
    text: str
    parameters: Optional[dict[str, Any]] = None


class Risk(Body):
    """How risky the agent judges the action (schema ``Risk``)."""

    level: Literal["low", "medium", "high"]
    reasons: list[str] = Field(default_factory=list)


class NewProposal(Body):
    """The body of ``POST /v1/proposals`` (schema ``NewProposal``)."""

    kind: str
    module: str
    summary: str
    action: dict[str, Any]
    sources: list[Source]
    rule: Rule
    risk: Risk
    idempotency_key: Optional[str] = None


class ProposalTag(Answer):
    """A tag pinning a cited snapshot (schema ``PinnedTag``)."""

    table: str
    snapshot_id: int
    tag: str


class ProposalCreated(Answer):
    """``POST /v1/proposals`` (schema ``Proposed``): 201 for a new proposal, 200 for a
    retried one (``duplicate``; its tags are the first request's)."""

    id: str
    status: str
    offset: int
    tags: Optional[list[ProposalTag]] = None
    duplicate: Optional[bool] = None


class Decision(Answer):
    """A decision on a proposal (schema ``Decision``): ``approved`` or ``rejected``."""

    decision: str
    decided_by: str
    decided_at: str
    offset: int
    reason: Optional[str] = None


class ProposalEntry(Answer):
    """A proposal as the store keeps it (schema ``ProposalEntry``)."""

    id: str
    kind: str
    agent: str
    module: str
    summary: str
    risk_level: str
    status: str
    created_at: str
    created_offset: int
    decision: Optional[Decision] = None

    @property
    def pending(self) -> bool:
        return self.status == "pending"


class ProposalList(Answer):
    """``GET /v1/proposals`` (schema ``ProposalList``), newest first."""

    proposals: list[ProposalEntry]


class CitedSource(Answer):
    """A source as recorded in a proposal's document: with the tag pinning its snapshot."""

    table: str
    snapshot_id: int
    offset: Optional[int] = None
    lag_ms: Optional[int] = None
    committed_at: Optional[str] = None
    keys: list[Row] = Field(default_factory=list)
    rows: list[Row] = Field(default_factory=list)
    tag: Optional[str] = None


class RecordedRule(Answer):
    name: str
    version: str
    text: str
    parameters: dict[str, Any] = Field(default_factory=dict)


class RecordedRisk(Answer):
    level: str
    reasons: list[str] = Field(default_factory=list)


class ProposalDocument(Answer):
    """The whole proposal as recorded (schema ``ProposalDocument``,
    ``decisions.proposal_created``'s ``document``)."""

    id: str
    agent: str
    kind: str
    module: str
    summary: str
    created_at: str
    action: dict[str, Any]
    sources: list[CitedSource]
    rule: RecordedRule
    risk: RecordedRisk


class ProposalDetail(Answer):
    """``GET /v1/proposals/{id}`` (schema ``ProposalDoc``): the store's entry and the recorded
    document."""

    proposal: ProposalEntry
    document: ProposalDocument


class NewDecision(Body):
    """The body of ``POST /v1/proposals/{id}/decision`` (schema ``NewDecision``)."""

    decision: Literal["approve", "reject"]
    reason: str


class DecisionResult(Answer):
    """``POST /v1/proposals/{id}/decision`` (schema ``Decided``)."""

    id: str
    status: str
    decided_by: str
    offset: int


# ---------------------------------------------------------------------------------------------
# Decision kinds, sheets, history


class InputDoc(Answer):
    """One input of a decision kind (schema ``InputDoc``): the column of a table it reads,
    by a key (key column → action field)."""

    name: str
    table: str
    column: str
    type: str
    key: dict[str, str]
    need: str


class StepDoc(Answer):
    name: str
    expression: str


class KindDoc(Answer):
    """A declared decision kind (schema ``KindDoc``)."""

    name: str
    module: str
    summary: str
    action: dict[str, Any]
    inputs: list[InputDoc]
    rule: list[StepDoc]
    description: Optional[str] = None


class KindList(Answer):
    """``GET /v1/decision-kinds`` (schema ``KindList``)."""

    kinds: list[KindDoc]

    def kind(self, name: str) -> KindDoc:
        for k in self.kinds:
            if k.name == name:
                return k
        raise KeyError(f"decision kind `{name}` is not declared (declared: {', '.join(k.name for k in self.kinds)})")


class SheetInput(Answer):
    """One number the decision looked at (schema ``SheetInput``)."""

    name: str
    table: str
    column: str
    key: dict[str, Any]
    value: Any
    snapshot_id: int
    tag: str
    need: str
    need_ms: int
    value_now: Any
    changed_since: bool
    offset: Optional[int] = None
    committed_at: Optional[str] = None
    lag_ms: Optional[int] = None
    cited_lag_ms: Optional[int] = None
    fresh_enough: Optional[bool] = None
    now_snapshot_id: Optional[int] = None
    now_offset: Optional[int] = None


class SheetStep(Answer):
    """One step of the rule's arithmetic (schema ``SheetStep``)."""

    name: str
    expression: str
    with_values: str
    value: Any
    error: Optional[str] = None


class Instant(Answer):
    inputs: list[str]
    offset: Optional[int] = None
    committed_at: Optional[str] = None


class Verdict(Answer):
    """Whether the inputs were read at one instant (schema ``Verdict``)."""

    one_instant: bool
    instants: list[Instant]
    offset_spread: int
    time_spread_ms: int
    text: str


class Sheet(Answer):
    """``GET /v1/proposals/{id}/sheet`` (schema ``Sheet``)."""

    proposal_id: str
    kind: str
    module: str
    agent: str
    status: str
    created_at: str
    summary: str
    agent_summary: str
    action: dict[str, Any]
    inputs: list[SheetInput]
    rule: list[SheetStep]
    rule_text: str
    verdict: Verdict
    description: Optional[str] = None

    def input(self, name: str) -> SheetInput:
        for i in self.inputs:
            if i.name == name:
                return i
        raise KeyError(f"input `{name}` is not on the sheet (inputs: {', '.join(i.name for i in self.inputs)})")

    def step(self, name: str) -> SheetStep:
        for s in self.rule:
            if s.name == name:
                return s
        raise KeyError(f"rule step `{name}` is not on the sheet")


class Day(Answer):
    day: str
    proposed: int
    decided: int


class Spread(Answer):
    count: int
    median_ms: int
    p90_ms: int
    max_ms: int


class InputHistory(Answer):
    name: str
    table: str
    column: str
    need: str
    decided_checked: int
    changed_before_decision: int
    unknown: int
    lag_known: int
    staler_than_needed: int


class History(Answer):
    """``GET /v1/decision-kinds/{kind}/history`` (schema ``History``)."""

    kind: str
    since: str
    until: str
    proposals: int
    approved: int
    rejected: int
    pending: int
    per_day: list[Day]
    inputs: list[InputHistory]
    not_one_instant: int
    truncated: bool
    time_to_decide: Optional[Spread] = None


# ---------------------------------------------------------------------------------------------
# Audit and outbox


class Evidence(Answer):
    """One cited source in an audit: the rows read back from the pinned tag next to the rows
    the agent cited."""

    table: str
    snapshot_id: int
    tag: Optional[str] = None
    keys: list[Row] = Field(default_factory=list)
    cited_rows: list[Row]
    rows_at_tag: list[Row]
    cited_rows_identical: bool
    receipt_at_tag: Optional[Receipt] = None
    cited_offset: Optional[int] = None
    cited_lag_ms: Optional[int] = None
    cited_committed_at: Optional[str] = None


class CausedEvent(Answer):
    """An event a module recorded citing the proposal as its causation (schema
    ``CausedEvent``)."""

    offset: int
    id: str
    type: str
    occurred_at: str
    causation: Optional[str] = None
    data: dict[str, Any]


class StateAfter(Answer):
    """The current rows of one key the evidence or the caused events touched."""

    table: str
    key: Row
    receipt: Receipt
    rows: list[Row]


class Audit(Answer):
    """``GET /v1/proposals/{id}/audit`` (schema ``Audit``)."""

    proposal: ProposalDocument
    status: str
    created_offset: int
    decision: Optional[Decision] = None
    evidence: list[Evidence]
    caused_events: list[CausedEvent]
    state_after: list[StateAfter]


class OutboxItem(Answer):
    """An approved proposal in its module's outbox (schema ``OutboxItem``)."""

    cursor: int
    proposal_id: str
    kind: str
    module: str
    summary: str
    action: dict[str, Any]
    decided_by: str
    decided_at: str
    reason: Optional[str] = None


class Outbox(Answer):
    """``GET /v1/outbox/{module}`` (schema ``Outbox``)."""

    module: str
    items: list[OutboxItem]
    next_after: int
