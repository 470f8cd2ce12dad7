"""The client's models against the server's OpenAPI document (`GET /v1/openapi.json`).

For every component schema the client models (MAPPING: model → schema name), the model must accept every answer
the schema allows: it has a field for each required property, a field the schema does not
require has a default, and each field's type covers the property's JSON types (nested models
must be the ones mapped to the referenced schemas). Request bodies (REQUESTS) are checked the
other way round: the model sends only properties the schema has, makes every required one
required, and sends only types the schema allows (REQUESTS: the request models of MAPPING).

A route that answered JSON the document did not type would be listed in UNTYPED and its model
checked against a real answer only; none is left. Every route's real answer is checked too
(`test_real_answers_fit_the_models`): each answer validates and holds every field the model
declares. A route of UNTYPED that gains a schema must name the schema its model is mapped to
(`test_untyped_routes_have_no_schema_or_the_models`).
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any, Union

import pytest
from conftest import Company
from pydantic import BaseModel

from livestate_client import Client, NotFound, models
from livestate_client.errors import _BY_CODE

# Every model of a component schema → that schema's name.
MAPPING: dict[type[BaseModel], str] = {
    # answers
    models.ErrorBody: "Error",
    models.Decision: "Decision",
    models.ProposalEntry: "ProposalEntry",
    models.ProposalList: "ProposalList",
    models.KindList: "KindList",
    models.KindDoc: "KindDoc",
    models.InputDoc: "InputDoc",
    models.StepDoc: "StepDoc",
    models.Sheet: "Sheet",
    models.SheetInput: "SheetInput",
    models.SheetStep: "SheetStep",
    models.Verdict: "Verdict",
    models.Instant: "Instant",
    models.History: "History",
    models.InputHistory: "InputHistory",
    models.Day: "Day",
    models.Spread: "Spread",
    models.OutboxItem: "OutboxItem",
    models.Outbox: "Outbox",
    models.ProposalDetail: "ProposalDoc",
    models.ProposalDocument: "ProposalDocument",
    models.CitedSource: "Source",
    models.RecordedRule: "Rule",
    models.RecordedRisk: "Risk",
    models.Audit: "Audit",
    models.Evidence: "Evidence",
    models.CausedEvent: "CausedEvent",
    models.StateAfter: "StateAfter",
    models.DecisionResult: "Decided",
    models.ProposalCreated: "Proposed",
    models.ProposalTag: "PinnedTag",
    models.WhoAmI: "WhoAmI",
    models.Role: "Role",
    models.Principal: "Principal",
    models.Principals: "Principals",
    models.Receipt: "Receipt",
    models.TableRows: "RowsAnswer",
    models.ConsistentReadResult: "ConsistentAnswer",
    models.TableInfo: "TableInfo",
    models.TableHealth: "TableHealth",
    models.BucketHealth: "BucketHealth",
    models.TagInfo: "TagInfo",
    models.TableSpend: "TableSpend",
    models.Spend: "Spend",
    models.Quarantined: "Quarantined",
    models.QuarantineList: "QuarantineList",
    models.EmitResult: "EventsAnswer",
    models.Appended: "AppendedLine",
    models.Firings: "Firings",
    models.Firing: "Firing",
    models.Health: "Health",
    models.TableSchema: "TableSchema",
    models.SchemaColumn: "SchemaColumn",
    models.Stores: "Stores",
    models.StoreMemory: "StoreMemory",
    # request bodies
    models.NewProposal: "NewProposal",
    models.Source: "Source",
    models.Rule: "Rule",
    models.Risk: "Risk",
    models.NewDecision: "NewDecision",
    models.ConsistentRead: "ConsistentRead",
    models.TableRead: "TableRead",
}

# The models of MAPPING that are request bodies (checked the other way round).
REQUESTS = {m for m in MAPPING if issubclass(m, models.Body)}

# Models of shapes the document is gaining schemas for (the server's types are being moved into
# one crate): checked against the schema where the document has it; until then their routes
# are untyped and their real answers are checked (UNTYPED).
WHEN_PRESENT: dict[type[BaseModel], str] = {}

# Routes whose 2xx answer has no schema in the document, and the model checked against a real
# answer instead.
UNTYPED: dict[tuple[str, str], type[BaseModel]] = {}

ANY = frozenset({"string", "integer", "number", "boolean", "array", "object", "null"})


@pytest.fixture(scope="module")
def doc(url: str) -> dict[str, Any]:
    with Client(url) as anonymous:
        d = anonymous.openapi()
    assert d["openapi"].startswith("3."), d.get("openapi")
    return d


def resolve(doc: dict[str, Any], schema: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The schema a `$ref` points at (and its name)."""
    ref = schema.get("$ref")
    if ref is None:
        return schema, None
    name = ref.rsplit("/", 1)[-1]
    return doc["components"]["schemas"][name], name


def schema_types(doc: dict[str, Any], schema: dict[str, Any]) -> frozenset[str]:
    """The JSON types a schema allows."""
    schema, _ = resolve(doc, schema)
    for combo in ("oneOf", "anyOf"):
        if combo in schema:
            return frozenset().union(*(schema_types(doc, s) for s in schema[combo]))
    t = schema.get("type")
    if t is None:
        if "enum" in schema:
            return frozenset(json_type(v) for v in schema["enum"])
        return ANY
    out = set([t] if isinstance(t, str) else t)
    if "integer" in out:
        out.add("integer")
    return frozenset(out)


def json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def model_types(ann: Any) -> frozenset[str]:
    """The JSON types a field of annotation `ann` accepts."""
    if ann is Any:
        return ANY
    if ann is type(None) or ann is None:
        return frozenset({"null"})
    origin = typing.get_origin(ann)
    if origin in (Union, types.UnionType):
        return frozenset().union(*(model_types(a) for a in typing.get_args(ann)))
    if origin is typing.Literal:
        return frozenset(json_type(v) for v in typing.get_args(ann))
    if origin in (list, tuple, set, typing.Sequence) or ann in (list, tuple):
        return frozenset({"array"})
    if origin in (dict, typing.Mapping) or ann is dict:
        return frozenset({"object"})
    if isinstance(ann, type):
        if issubclass(ann, BaseModel):
            return frozenset({"object"})
        if issubclass(ann, bool):
            return frozenset({"boolean"})
        if issubclass(ann, int):
            return frozenset({"integer"})
        if issubclass(ann, float):
            return frozenset({"number", "integer"})
        if issubclass(ann, str):
            return frozenset({"string"})
    raise AssertionError(f"no JSON type known for annotation {ann!r}")


def non_null(ann: Any) -> list[Any]:
    """The non-None members of a union (or the annotation itself)."""
    if typing.get_origin(ann) in (Union, types.UnionType):
        return [a for a in typing.get_args(ann) if a is not type(None)]
    return [ann]


def nested_problems(doc: dict[str, Any], where: str, ann: Any, prop: dict[str, Any], request: bool) -> list[str]:
    """Array items and referenced schemas: the nested model must be the one mapped to the
    referenced schema, and array items' types must fit."""
    problems = []
    refs = [prop] + list(prop.get("oneOf", [])) + list(prop.get("anyOf", []))
    ref_names = {resolve(doc, r)[1] for r in refs if "$ref" in r}
    ref_names.discard(None)
    objects = {r for r in ref_names if doc["components"]["schemas"][r].get("type") == "object"}
    for a in non_null(ann):
        if isinstance(a, type) and issubclass(a, BaseModel) and objects:
            mapped = MAPPING.get(a) or WHEN_PRESENT.get(a)
            if mapped not in objects:
                problems.append(f"{where}: model {a.__name__} is mapped to {mapped!r}, the schema references {sorted(objects)}")
        if typing.get_origin(a) is list and "array" in schema_types(doc, prop):
            (item_ann,) = typing.get_args(a)
            items = resolve(doc, prop)[0].get("items", {})
            ok, why = fits(doc, item_ann, items, request)
            if not ok:
                problems.append(f"{where}[]: {why}")
            problems += nested_problems(doc, f"{where}[]", item_ann, items, request)
    return problems


def enum_of(doc: dict[str, Any], prop: dict[str, Any]) -> set[Any] | None:
    """The values an enum schema (or a reference to one) allows."""
    schema, _ = resolve(doc, prop)
    return set(schema["enum"]) if "enum" in schema else None


def literal_values(ann: Any) -> set[Any] | None:
    members = non_null(ann)
    if len(members) == 1 and typing.get_origin(members[0]) is typing.Literal:
        return set(typing.get_args(members[0]))
    return None


def fits(doc: dict[str, Any], ann: Any, prop: dict[str, Any], request: bool) -> tuple[bool, str]:
    enum, literal = enum_of(doc, prop), literal_values(ann)
    if enum is not None and literal is not None:
        if request and not literal <= enum:
            return False, f"the model sends {sorted(literal)}, the schema's enum allows {sorted(enum)}"
        if not request and not enum <= literal:
            return False, f"the schema's enum allows {sorted(enum)}, the model accepts only {sorted(literal)}"
    st, mt = schema_types(doc, prop), model_types(ann)
    if request:
        extra = mt - st
        return (not extra or mt == ANY), f"the model sends {sorted(mt)}, the schema allows {sorted(st)}"
    missing = st - mt
    return not missing, f"the schema allows {sorted(st)}, the model accepts only {sorted(mt)}"


def check(doc: dict[str, Any], model: type[BaseModel], name: str, request: bool) -> list[str]:
    schemas = doc["components"]["schemas"]
    if name not in schemas:
        return [f"{model.__name__}: the document has no component schema {name!r}"]
    schema = schemas[name]
    props: dict[str, Any] = dict(schema.get("properties", {}))
    required = set(schema.get("required", []))
    if "oneOf" in schema and not props:
        # A tagged enum (Role): each variant's properties; required where every variant has it.
        variants = [resolve(doc, v)[0] for v in schema["oneOf"]]
        for v in variants:
            for k, p in v.get("properties", {}).items():
                props.setdefault(k, p)
        required = set.intersection(*(set(v.get("required", [])) for v in variants))
    fields = {(f.alias or n): f for n, f in model.model_fields.items()}
    problems = []
    for prop in sorted(required):
        if prop not in fields:
            problems.append(f"{model.__name__}.{prop}: required by schema {name} but the model has no such field")
    for fname, f in fields.items():
        where = f"{model.__name__}.{fname}"
        if fname not in props:
            if request:
                problems.append(f"{where}: schema {name} has no property {fname!r} (the server refuses unknown fields)")
            elif f.is_required():
                problems.append(f"{where}: required by the model but schema {name} has no such property")
            continue
        if not request and f.is_required() and fname not in required:
            problems.append(f"{where}: required by the model but optional in schema {name} (give it a default)")
        if request and fname in required and not f.is_required():
            problems.append(f"{where}: required by schema {name} but has a default in the model")
        ann = f.annotation
        if request and f.default is None and not f.is_required():
            # None is left out of the body (exclude_none), so null is never sent.
            ann_types = [a for a in non_null(ann)]
            ann = Union[tuple(ann_types)] if len(ann_types) > 1 else ann_types[0]
        ok, why = fits(doc, ann, props[fname], request)
        if not ok:
            ref = resolve(doc, props[fname])[1]
            problems.append(f"{where}: {why} (schema {name}.{fname}{f' → {ref}' if ref else ''})")
        problems += nested_problems(doc, where, ann, props[fname], request)
    return problems


@pytest.mark.parametrize("model,name", list(MAPPING.items()), ids=[m.__name__ for m in MAPPING])
def test_model_covers_its_component_schema(doc: dict[str, Any], model: type[BaseModel], name: str) -> None:
    problems = check(doc, model, name, request=model in REQUESTS)
    assert not problems, "\n".join(problems)


def test_models_of_schemas_the_document_is_gaining(doc: dict[str, Any]) -> None:
    problems = []
    for model, name in WHEN_PRESENT.items():
        if name in doc["components"]["schemas"]:
            problems += check(doc, model, name, request=False)
        else:
            assert any(m is model or model in nested_models(m) for m in UNTYPED.values()), (
                f"{model.__name__}: neither a schema {name!r} nor an untyped route whose real answer is checked"
            )
    assert not problems, "\n".join(problems)


def nested_models(model: type[BaseModel]) -> set[type[BaseModel]]:
    """Every model a model's fields hold, recursively."""
    out: set[type[BaseModel]] = set()
    for f in model.model_fields.values():
        for a in non_null(f.annotation):
            inner = typing.get_args(a)[0] if typing.get_origin(a) is list else a
            if isinstance(inner, type) and issubclass(inner, BaseModel) and inner not in out:
                out |= {inner} | nested_models(inner)
    return out


def test_every_component_schema_is_modelled_or_named_as_not(doc: dict[str, Any]) -> None:
    # SqlRequest, SqlAnswer: the client has no SQL call (agents read rows and consistent reads).
    # Enums (ErrorCode, ProposalStatus, RiskLevel...) are checked where a modelled schema uses
    # them (a Literal must match the enum; ErrorCode's codes below).
    not_modelled = {"SqlRequest", "SqlAnswer"}
    names = {n for n, sch in doc["components"]["schemas"].items() if "enum" not in sch}
    unmodelled = names - set(MAPPING.values()) - set(WHEN_PRESENT.values()) - not_modelled
    assert not unmodelled, f"component schemas without a model in MAPPING: {sorted(unmodelled)}"


def test_every_error_code_has_its_error_class(doc: dict[str, Any]) -> None:
    codes = set(doc["components"]["schemas"]["ErrorCode"]["enum"])
    assert not codes - set(_BY_CODE), f"codes the client does not map to a class: {sorted(codes - set(_BY_CODE))}"


def test_every_json_answer_of_every_route_has_a_schema(doc: dict[str, Any]) -> None:
    """A 2xx answer is typed unless it is not JSON (Prometheus text, a server-sent event stream)
    or its route is in UNTYPED."""
    not_json = {"text/plain", "text/event-stream"}
    untyped = []
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if (method, path) in UNTYPED:
                continue
            for status, resp in op["responses"].items():
                if not status.startswith("2") or status == "204":
                    continue
                content = resp.get("content")
                if not content:
                    untyped.append(f"{method.upper()} {path} {status}: no content")
                    continue
                for media, body in content.items():
                    if media not in not_json and "schema" not in body:
                        untyped.append(f"{method.upper()} {path} {status} {media}: no schema")
    assert not untyped, "answers without a schema: " + "; ".join(untyped)


def test_untyped_routes_have_no_schema_or_the_models(doc: dict[str, Any]) -> None:
    """A route of UNTYPED that gains a schema must name the schema its model is mapped to."""
    for (method, path), model in UNTYPED.items():
        op = doc["paths"][path][method]
        for status, resp in op["responses"].items():
            if status.startswith("2"):
                for content in resp.get("content", {}).values():
                    if "schema" not in content:
                        continue
                    schema = content["schema"]
                    if schema.get("type") == "array":
                        schema = schema.get("items", {})
                    got = schema["$ref"].rsplit("/", 1)[-1] if "$ref" in schema else None
                    want = MAPPING.get(model) or WHEN_PRESENT.get(model)
                    assert got is not None and got == want, (
                        f"{method.upper()} {path} {status} now has a schema {content['schema']}: "
                        f"map {model.__name__} to it in MAPPING (it is mapped to {want!r})"
                    )


# Fields a real answer may leave out, by model (why: in the comment).
ABSENT_OK: dict[type[BaseModel], set[str]] = {
    # Which of these a role has depends on its kind; checked per kind below.
    models.Role: {"agent", "person", "module", "scopes"},
    # Only an internal error carries an incident number.
    models.ErrorBody: {"incident"},
    # `duplicate` only on a retried proposal (200).
    models.ProposalCreated: {"duplicate"},
    # `error` only while the record refuses appends (503).
    models.Health: {"error"},
}


def missing_fields(model: type[BaseModel], data: Any, path: str) -> list[str]:
    """Fields the model declares that the answer does not hold, recursively."""
    if not isinstance(data, dict):
        return [f"{path}: expected an object for {model.__name__}, got {type(data).__name__}"]
    out = []
    for name, f in model.model_fields.items():
        key = f.alias or name
        if key not in data:
            if name not in ABSENT_OK.get(model, set()):
                out.append(f"{path}.{key} ({model.__name__})")
            continue
        for a in non_null(f.annotation):
            if isinstance(a, type) and issubclass(a, BaseModel) and data[key] is not None:
                out += missing_fields(a, data[key], f"{path}.{key}")
            elif typing.get_origin(a) is list:
                (inner,) = typing.get_args(a)
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    for i, item in enumerate(data[key] or []):
                        out += missing_fields(inner, item, f"{path}.{key}[{i}]")
    return out


def fits_answer(model: type[BaseModel], data: Any, what: str) -> None:
    model.model_validate(data)
    missing = missing_fields(model, data, what)
    assert not missing, f"{what}: fields the model declares but the answer lacks: {missing}"


def test_real_answers_fit_the_models(
    admin: Client, agent: Client, person: Client, module: Client, company: Company, unique: str
) -> None:
    line = {"id": f"{unique}-x", "type": "inventory.stock_counted", "occurred_at": "2026-03-02T08:00:00Z",
            "data": {"item": company.item, "location": "south", "on_hand": 1}}
    emitted = module.request("POST", "/v1/events", content=json.dumps(line) + "\n", content_type="application/x-ndjson")
    fits_answer(models.EmitResult, emitted, "POST /v1/events")
    company.shortage()
    fits_answer(models.Health, admin.request("GET", "/v1/health"), "GET /v1/health")
    with pytest.raises(NotFound) as e:
        agent.request("GET", "/v1/tables/no_such_table/rows")
    fits_answer(models.ErrorBody, e.value.body, "an error answer")
    for c, kind, keys in [
        (admin, "admin", set()),
        (agent, "agent", {"agent"}),
        (person, "person", {"person", "scopes"}),
        (module, "module", {"module"}),
    ]:
        me = c.request("GET", "/v1/whoami")
        fits_answer(models.WhoAmI, me, "GET /v1/whoami")
        assert me["role"]["kind"] == kind and keys <= set(me["role"]), me
    tables = admin.request("GET", "/v1/tables")
    assert isinstance(tables, list) and tables
    for t in tables:
        fits_answer(models.TableInfo, t, "GET /v1/tables[]")
    fits_answer(models.TableSchema, agent.request("GET", "/v1/tables/stock/schema"), "GET /v1/tables/stock/schema")
    read = agent.request("POST", "/v1/reads", json_body={"tables": [
        {"table": "stock", "keys": {"item": company.item, "location": company.location}},
        {"table": "supplier_items", "keys": {"item": company.item, "supplier": company.supplier}},
        {"table": "supplier_risk", "keys": {"supplier": company.supplier}},
    ]})
    fits_answer(models.ConsistentReadResult, read, "POST /v1/reads")
    fits_answer(models.TableRows, agent.request("GET", "/v1/tables/stock/rows", params=[("item", company.item)]),
                "GET /v1/tables/stock/rows")
    fits_answer(models.Firings, agent.request("GET", "/v1/triggers/stock_below_reorder_point/firings",
                                               params=[("ack", "false"), ("limit", "5")]), "GET firings")
    fits_answer(models.Principals, admin.request("GET", "/v1/principals"), "GET /v1/principals")
    fits_answer(models.QuarantineList, agent.request("GET", "/v1/quarantine"), "GET /v1/quarantine")

    parsed = models.ConsistentReadResult.model_validate(read)
    body = models.NewProposal(
        kind="stock_replenishment", module="procurement", summary="schema check",
        action={"item": company.item, "location": company.location, "supplier": company.supplier, "qty": 90},
        sources=[r.cite() for r in parsed.results],
        rule=models.Rule(name="r", version="1", text="t"), risk=models.Risk(level="low"),
        idempotency_key=unique,
    ).model_dump(mode="json", exclude_none=True)
    created = agent.request("POST", "/v1/proposals", json_body=body)
    fits_answer(models.ProposalCreated, created, "POST /v1/proposals")
    pid = created["id"]
    fits_answer(models.ProposalDetail, agent.request("GET", f"/v1/proposals/{pid}"), "GET /v1/proposals/{id}")
    decided = person.request("POST", f"/v1/proposals/{pid}/decision", json_body={"decision": "approve", "reason": "ok"})
    fits_answer(models.DecisionResult, decided, "POST /v1/proposals/{id}/decision")
    fits_answer(models.Audit, agent.request("GET", f"/v1/proposals/{pid}/audit"), "GET /v1/proposals/{id}/audit")
    outbox = admin.request("GET", "/v1/outbox/procurement", params=[("after", str(decided["offset"] - 1))])
    fits_answer(models.Outbox, outbox, "GET /v1/outbox/procurement")
    assert outbox["items"] and outbox["items"][0]["proposal_id"] == pid
    # The typed routes' real answers fit their models too.
    fits_answer(models.Sheet, agent.request("GET", f"/v1/proposals/{pid}/sheet"), "GET /v1/proposals/{id}/sheet")
    fits_answer(models.KindList, agent.request("GET", "/v1/decision-kinds"), "GET /v1/decision-kinds")
    fits_answer(models.History, agent.request("GET", "/v1/decision-kinds/stock_replenishment/history",
                                              params=[("since", "1d")]), "GET history")
    fits_answer(models.ProposalList, agent.request("GET", "/v1/proposals", params=[("limit", "3")]), "GET /v1/proposals")
