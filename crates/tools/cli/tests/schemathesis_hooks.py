"""Hooks for tests/api_schema.rs: how schemathesis sends a body of JSON lines (POST /v1/events)."""

import json

import schemathesis


@schemathesis.serializer("application/x-ndjson")
def json_lines(ctx, value):
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "replace")
    if isinstance(value, list):
        return "".join(json.dumps(v) + "\n" for v in value).encode()
    return (json.dumps(value) + "\n").encode()
