"""The synchronous client."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional, TypeVar, Union
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from .errors import (
    AnswerError,
    ClientInputError,
    DecisionTimeout,
    LivestateError,
    TransportError,
    Unavailable,
    from_answer,
)
from .models import (
    Audit,
    ConsistentRead,
    ConsistentReadResult,
    DecisionResult,
    EmitResult,
    Event,
    Firings,
    Health,
    History,
    KindList,
    NewDecision,
    NewProposal,
    Outbox,
    ProposalCreated,
    ProposalDetail,
    ProposalEntry,
    ProposalList,
    Sheet,
    TableInfo,
    TableRead,
    TableRows,
    TableSchema,
    WhoAmI,
)

M = TypeVar("M", bound=BaseModel)

#: Parameters of ``GET /v1/tables/{t}/rows`` that are not column filters.
RESERVED_ROW_PARAMS = frozenset({"where", "limit", "snapshot", "tag"})

EventLike = Union[Event, Mapping[str, Any], str]


def _segment(name: str, what: str) -> str:
    """A path segment: a non-empty string, percent-encoded."""
    if not isinstance(name, str) or not name:
        raise ClientInputError(f"{what} must be a non-empty string, not {name!r}")
    return quote(name, safe="")


def _param(value: Any, what: str) -> str:
    """A query value as the server parses it (by the column's type)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    # Decimal, date and the like print as the server reads them.
    if value is None or isinstance(value, (list, tuple, dict, set, bytes)):
        raise ClientInputError(f"{what}: expected a single value (string, number or bool), not {value!r}")
    return str(value)


class Client:
    """A client of the livestate server at ``base_url`` acting with ``token``.

    Every call is bounded by ``timeout`` seconds (connecting, sending, waiting for and reading
    the answer). Answers are pydantic models (:mod:`livestate_client.models`); error answers
    raise :class:`~livestate_client.LivestateError` subclasses. Use it as a context manager,
    or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str,
        token: Optional[str] = None,
        *,
        timeout: float = 30.0,
        transport: Optional[httpx.BaseTransport] = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ClientInputError(f"base URL {base_url!r}: expected http://host:port or https://host:port")
        if token is not None and (not isinstance(token, str) or not token.strip()):
            raise ClientInputError("token must be a non-empty string (or None for the routes that need none)")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            raise ClientInputError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.base_url = base_url.rstrip("/")
        self.token = token.strip() if token else None
        self.timeout = float(timeout)
        headers = {"Accept": "application/json", "User-Agent": "livestate-client-python"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=self.timeout, transport=transport
        )

    # -- plumbing ---------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def with_token(self, token: str) -> "Client":
        """A new client of the same server acting with another token (close it too)."""
        return Client(self.base_url, token, timeout=self.timeout)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Optional[Sequence[tuple[str, str]]] = None,
        json_body: Any = None,
        content: Optional[str] = None,
        content_type: Optional[str] = None,
    ) -> Any:
        """One call; the answer's JSON (or text, for a non-JSON answer). Raises the error the
        answer stands for."""
        headers = {"Content-Type": content_type} if content_type else None
        try:
            resp = self._http.request(
                method,
                path,
                params=list(params) if params else None,
                json=json_body,
                content=content.encode("utf-8") if content is not None else None,
                headers=headers,
            )
        except httpx.TimeoutException as e:
            raise TransportError(
                "request_timeout",
                f"{method} {self.base_url}{path}: no answer within {self.timeout:g} s ({type(e).__name__})",
                retryable=True,
            ) from e
        except httpx.HTTPError as e:
            raise TransportError(
                "unavailable", f"{method} {self.base_url}{path}: {type(e).__name__}: {e}", retryable=True
            ) from e
        text = resp.text
        try:
            body: Any = json.loads(text) if text else None
        except ValueError:
            body = None
        if resp.status_code >= 400:
            raise from_answer(resp.status_code, body, text, resp.headers.get("Retry-After"))
        return body if body is not None else text

    def _get(self, path: str, params: Optional[Sequence[tuple[str, str]]] = None) -> Any:
        return self.request("GET", path, params=params)

    def _post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, json_body=body)

    @staticmethod
    def _parse(model: type[M], value: Any, route: str) -> M:
        try:
            return model.model_validate(value)
        except ValidationError as e:
            raise AnswerError(
                "internal", f"the answer of {route} is not a {model.__name__}: {e}", body=value
            ) from e

    # -- health and identity ----------------------------------------------------------------

    def health(self) -> Health:
        """``GET /v1/health``: whether the record takes appends, its next offset, what each
        embedded store holds in memory. A server refusing appends raises
        :class:`~livestate_client.Unavailable` (503)."""
        return self._parse(Health, self._get("/v1/health"), "GET /v1/health")

    def whoami(self) -> WhoAmI:
        """``GET /v1/whoami``: the caller's name and role."""
        return self._parse(WhoAmI, self._get("/v1/whoami"), "GET /v1/whoami")

    def openapi(self) -> dict[str, Any]:
        """``GET /v1/openapi.json``: the OpenAPI document."""
        doc = self._get("/v1/openapi.json")
        if not isinstance(doc, dict):
            raise AnswerError("internal", "GET /v1/openapi.json did not answer a JSON object", body=doc)
        return doc

    # -- reads ------------------------------------------------------------------------------

    def tables(self) -> list[TableInfo]:
        """``GET /v1/tables``: every table's receipt, budget, LSM health and spend."""
        v = self._get("/v1/tables")
        if not isinstance(v, list):
            raise AnswerError("internal", "GET /v1/tables did not answer a list", body=v)
        return [self._parse(TableInfo, t, "GET /v1/tables") for t in v]

    def schema(self, table: str) -> TableSchema:
        """``GET /v1/tables/{table}/schema``: columns, types, primary key, budget."""
        path = f"/v1/tables/{_segment(table, 'table')}/schema"
        return self._parse(TableSchema, self._get(path), f"GET {path}")

    def rows(
        self,
        table: str,
        key: Optional[Mapping[str, Any]] = None,
        *,
        where: Optional[str] = None,
        limit: Optional[int] = None,
        snapshot: Optional[int] = None,
        tag: Optional[str] = None,
    ) -> TableRows:
        """``GET /v1/tables/{table}/rows``: rows with their receipt.

        ``key`` holds ``column: value`` filters (a value of each key column makes a point
        read); ``where`` a condition in the spec's expression language; ``limit`` at most so
        many rows; ``snapshot`` or ``tag`` for time travel."""
        params: list[tuple[str, str]] = []
        for col, value in (key or {}).items():
            if not isinstance(col, str) or not col:
                raise ClientInputError(f"key: column names must be non-empty strings, not {col!r}")
            if col in RESERVED_ROW_PARAMS:
                raise ClientInputError(
                    f"key: column `{col}` cannot be a filter: `{col}` is a parameter of the rows route; "
                    "use where=\"" + col + " == ...\" instead"
                )
            params.append((col, _param(value, f"key `{col}`")))
        if where is not None:
            if not isinstance(where, str) or not where.strip():
                raise ClientInputError(f"where must be a non-empty condition, not {where!r}")
            params.append(("where", where))
        if limit is not None:
            if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
                raise ClientInputError(f"limit must be a non-negative integer, not {limit!r}")
            params.append(("limit", str(limit)))
        if snapshot is not None and tag is not None:
            raise ClientInputError("give snapshot or tag, not both")
        if snapshot is not None:
            if not isinstance(snapshot, int) or isinstance(snapshot, bool):
                raise ClientInputError(f"snapshot must be an integer snapshot id, not {snapshot!r}")
            params.append(("snapshot", str(snapshot)))
        if tag is not None:
            if not isinstance(tag, str) or not tag:
                raise ClientInputError(f"tag must be a non-empty string, not {tag!r}")
            params.append(("tag", tag))
        path = f"/v1/tables/{_segment(table, 'table')}/rows"
        return self._parse(TableRows, self._get(path, params), f"GET {path}")

    def consistent_read(self, tables: Sequence[Union[TableRead, Mapping[str, Any]]]) -> ConsistentReadResult:
        """``POST /v1/reads``: several tables as of one record offset (every receipt's
        ``offset`` is the answer's ``offset``). Each entry is a :class:`TableRead` or a
        mapping ``{"table", "keys"?, "where"?, "limit"?}``."""
        if isinstance(tables, (str, bytes, Mapping)) or not isinstance(tables, Sequence):
            raise ClientInputError("tables must be a list of {table, keys?, where?, limit?}")
        if not tables:
            raise ClientInputError("tables must name at least one table")
        reads = []
        for i, t in enumerate(tables):
            try:
                reads.append(t if isinstance(t, TableRead) else TableRead.model_validate(t))
            except ValidationError as e:
                raise ClientInputError(f"tables[{i}]: {_first_problem(e)}") from e
        body = ConsistentRead(tables=reads).model_dump(mode="json", exclude_none=True)
        return self._parse(ConsistentReadResult, self._post("/v1/reads", body), "POST /v1/reads")

    # -- events -----------------------------------------------------------------------------

    def emit(self, events: Union[str, Iterable[EventLike]]) -> EmitResult:
        """``POST /v1/events``: appends events, one JSON line each, all or none. ``events``
        is NDJSON text, or an iterable of :class:`Event`, mappings or JSON lines. The answer
        gives each line's offset and whether it was a duplicate (same id, same content)."""
        if isinstance(events, str):
            text = events
        else:
            if isinstance(events, (bytes, Mapping, Event)):
                raise ClientInputError("events must be NDJSON text or a list of events, not a single event")
            lines = []
            for i, e in enumerate(events):
                if isinstance(e, Event):
                    lines.append(e.model_dump_json(exclude_none=True))
                elif isinstance(e, Mapping):
                    try:
                        lines.append(json.dumps(dict(e), separators=(",", ":"), allow_nan=False))
                    except (TypeError, ValueError) as err:
                        raise ClientInputError(f"events[{i}] is not JSON: {err}") from err
                elif isinstance(e, str):
                    if "\n" in e.strip():
                        raise ClientInputError(f"events[{i}] holds a line break: one event per line")
                    lines.append(e.strip())
                else:
                    raise ClientInputError(f"events[{i}] is a {type(e).__name__}: expected an Event, a mapping or a JSON line")
            text = "\n".join(lines) + "\n"
        if not text.strip():
            raise ClientInputError("no events to emit")
        v = self.request("POST", "/v1/events", content=text, content_type="application/x-ndjson")
        return self._parse(EmitResult, v, "POST /v1/events")

    # -- triggers ---------------------------------------------------------------------------

    def firings(
        self, trigger: str, *, consumer: Optional[str] = None, ack: bool = True, limit: Optional[int] = None
    ) -> Firings:
        """``GET /v1/triggers/{trigger}/firings``: firings after the caller's cursor (moved
        past them unless ``ack`` is false)."""
        params = [("ack", "true" if ack else "false")]
        if consumer is not None:
            params.append(("consumer", _param(consumer, "consumer")))
        if limit is not None:
            params.append(("limit", _param(limit, "limit")))
        path = f"/v1/triggers/{_segment(trigger, 'trigger')}/firings"
        return self._parse(Firings, self._get(path, params), f"GET {path}")

    # -- proposals --------------------------------------------------------------------------

    def decision_kinds(self) -> KindList:
        """``GET /v1/decision-kinds``: what a proposal of each declared kind must hold and cite."""
        return self._parse(KindList, self._get("/v1/decision-kinds"), "GET /v1/decision-kinds")

    def propose(self, proposal: Union[NewProposal, Mapping[str, Any]]) -> ProposalCreated:
        """``POST /v1/proposals`` (an agent's token): the new proposal's id, status and the
        tags pinning the cited snapshots. The same ``idempotency_key`` again answers the
        first proposal."""
        if not isinstance(proposal, NewProposal):
            if not isinstance(proposal, Mapping):
                raise ClientInputError(f"proposal must be a NewProposal or a mapping, not {type(proposal).__name__}")
            try:
                proposal = NewProposal.model_validate(proposal)
            except ValidationError as e:
                raise ClientInputError(f"proposal: {_first_problem(e)}") from e
        body = proposal.model_dump(mode="json", exclude_none=True)
        return self._parse(ProposalCreated, self._post("/v1/proposals", body), "POST /v1/proposals")

    def proposals(self, status: Optional[str] = None, limit: Optional[int] = None) -> list[ProposalEntry]:
        """``GET /v1/proposals``: proposals newest first (``status``: ``pending``,
        ``approved`` or ``rejected``)."""
        params = []
        if status is not None:
            params.append(("status", _param(status, "status")))
        if limit is not None:
            if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
                raise ClientInputError(f"limit must be a non-negative integer, not {limit!r}")
            params.append(("limit", str(limit)))
        return self._parse(ProposalList, self._get("/v1/proposals", params), "GET /v1/proposals").proposals

    def proposal(self, proposal_id: str) -> ProposalDetail:
        """``GET /v1/proposals/{id}``: its status, decision and the recorded document."""
        path = f"/v1/proposals/{_segment(proposal_id, 'proposal id')}"
        return self._parse(ProposalDetail, self._get(path), f"GET {path}")

    def decide(self, proposal_id: str, decision: str, reason: str) -> DecisionResult:
        """``POST /v1/proposals/{id}/decision`` (a person's token whose scopes hold the
        proposal's module): ``decision`` is ``approve`` or ``reject``. A second decision
        raises :class:`~livestate_client.Conflict`."""
        try:
            body = NewDecision(decision=decision, reason=reason)  # type: ignore[arg-type]
        except ValidationError as e:
            raise ClientInputError(_first_problem(e)) from e
        path = f"/v1/proposals/{_segment(proposal_id, 'proposal id')}/decision"
        return self._parse(DecisionResult, self._post(path, body.model_dump(mode="json")), f"POST {path}")

    def approve(self, proposal_id: str, reason: str) -> DecisionResult:
        return self.decide(proposal_id, "approve", reason)

    def reject(self, proposal_id: str, reason: str) -> DecisionResult:
        return self.decide(proposal_id, "reject", reason)

    def sheet(self, proposal_id: str) -> Sheet:
        """``GET /v1/proposals/{id}/sheet``: the decision input sheet of a proposal of a
        declared kind."""
        path = f"/v1/proposals/{_segment(proposal_id, 'proposal id')}/sheet"
        return self._parse(Sheet, self._get(path), f"GET {path}")

    def audit(self, proposal_id: str) -> Audit:
        """``GET /v1/proposals/{id}/audit``: the evidence read back from the pinned tags, the
        decision, the events it caused and the state after them."""
        path = f"/v1/proposals/{_segment(proposal_id, 'proposal id')}/audit"
        return self._parse(Audit, self._get(path), f"GET {path}")

    def history(self, kind: str, since: str = "30d") -> History:
        """``GET /v1/decision-kinds/{kind}/history?since=``."""
        path = f"/v1/decision-kinds/{_segment(kind, 'kind')}/history"
        return self._parse(History, self._get(path, [("since", _param(since, "since"))]), f"GET {path}")

    def wait_for_decision(
        self, proposal_id: str, timeout: float = 300.0, poll_interval: float = 0.5
    ) -> ProposalEntry:
        """Polls the proposal until it is no longer pending; its entry (with the decision).

        A retryable failure of one poll (the server restarting, too many requests) is waited
        out until the deadline; any other error is raised at once. Raises
        :class:`~livestate_client.DecisionTimeout` after ``timeout`` seconds (plus at most one
        call's own timeout)."""
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ClientInputError(f"timeout must be a positive number of seconds, not {timeout!r}")
        if not isinstance(poll_interval, (int, float)) or poll_interval <= 0:
            raise ClientInputError(f"poll_interval must be a positive number of seconds, not {poll_interval!r}")
        deadline = time.monotonic() + timeout
        last_failure: Optional[Unavailable] = None
        while True:
            pause = poll_interval
            try:
                entry = self.proposal(proposal_id).proposal
                if entry.status != "pending":
                    return entry
                last_failure = None
            except Unavailable as e:
                last_failure = e
                pause = max(poll_interval, e.retry_after or 0.0)
            left = deadline - time.monotonic()
            if left <= 0:
                why = f" (the last poll failed: {last_failure})" if last_failure else ""
                raise DecisionTimeout(
                    "request_timeout",
                    f"proposal `{proposal_id}` was still pending after {timeout:g} s{why}",
                    retryable=True,
                ) from last_failure
            time.sleep(min(pause, left))

    # -- modules ----------------------------------------------------------------------------

    def outbox(self, module: str, after: int = 0, limit: Optional[int] = None) -> Outbox:
        """``GET /v1/outbox/{module}?after=``: approved proposals after the cursor."""
        params = [("after", _param(after, "after"))]
        if limit is not None:
            params.append(("limit", _param(limit, "limit")))
        path = f"/v1/outbox/{_segment(module, 'module')}"
        return self._parse(Outbox, self._get(path, params), f"GET {path}")


def _first_problem(e: ValidationError) -> str:
    """A pydantic error in one line, naming the field."""
    errs = e.errors()
    parts = []
    for err in errs[:3]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(body)"
        parts.append(f"{loc}: {err.get('msg')}")
    more = f" (and {len(errs) - 3} more)" if len(errs) > 3 else ""
    return "; ".join(parts) + more


__all__ = ["Client", "LivestateError", "RESERVED_ROW_PARAMS"]
