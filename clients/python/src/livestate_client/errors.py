"""The errors the client raises.

Every error answer of the API is JSON ``{"code", "message", "retryable", "incident"?}`` (the
``Error`` schema of ``/v1/openapi.json``). ``code`` is the stable name a program matches on;
``message`` names the problem for a person. The client raises one subclass of
:class:`LivestateError` per kind of failure, as the server groups its codes:

=======================  ===============================================================
class                    codes
=======================  ===============================================================
:class:`InputError`      ``bad_request``, ``method_not_allowed``, ``payload_too_large``,
                         ``unsupported_media_type``, ``not_implemented``, and bad
                         arguments given to the client itself (also a ``ValueError``)
:class:`AuthError`       ``unauthenticated`` (:class:`Unauthenticated`),
                         ``forbidden`` (:class:`Forbidden`); both are input errors
:class:`NotFound`        ``not_found``
:class:`Conflict`        ``conflict``
:class:`Unavailable`     ``unavailable``, ``too_many_requests``, ``request_timeout``,
                         ``insufficient_storage``, a server that cannot be reached
                         (:class:`TransportError`), a decision not made in time
                         (:class:`DecisionTimeout`); ``retryable`` is true
:class:`InternalError`   ``internal`` (with ``incident``), an answer that is not what the
                         API documents (:class:`AnswerError`)
=======================  ===============================================================
"""

from __future__ import annotations

from typing import Any, Optional


class LivestateError(Exception):
    """A call that failed: the server's code, message and whether to retry, the HTTP status
    (``None`` when no answer came) and, for an internal error, the incident number the
    server's log holds the cause under."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool = False,
        status: Optional[int] = None,
        incident: Optional[int] = None,
        retry_after: Optional[float] = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.status = status
        self.incident = incident
        self.retry_after = retry_after
        self.body = body

    def __str__(self) -> str:
        where = f"{self.status} " if self.status is not None else ""
        incident = f" (incident {self.incident})" if self.incident is not None else ""
        return f"{where}{self.code}: {self.message}{incident}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, status={self.status!r}, "
            f"retryable={self.retryable!r}, message={self.message!r})"
        )


class InputError(LivestateError):
    """The request does not fit: a parameter, body, event line, key or query (named in the
    message). Sending it again unchanged fails again."""


class ClientInputError(InputError, ValueError):
    """An argument given to the client that it cannot send (named in the message); nothing
    was sent."""

    def __init__(self, message: str) -> None:
        super().__init__("bad_request", message)


class AuthError(InputError):
    """The token is missing or not valid, or its role may not do this."""


class Unauthenticated(AuthError):
    """No token, or one the server does not know (or revoked): 401."""


class Forbidden(AuthError):
    """The caller's role lacks the permission the message names: 403."""


class NotFound(LivestateError):
    """No such table, trigger, proposal, decision kind or route: 404."""


class Conflict(LivestateError):
    """An event id or idempotency key reused with other content, or a second decision: 409."""


class Unavailable(LivestateError):
    """The request may succeed later, unchanged (``retry_after`` in seconds when the server
    said so)."""


class TransportError(Unavailable):
    """The server could not be reached, or its answer not read in time."""


class DecisionTimeout(Unavailable, TimeoutError):
    """:meth:`Client.wait_for_decision` gave up: the proposal was still pending."""


class InternalError(LivestateError):
    """livestate failed (500); ``incident`` is the number its log holds the cause under."""


class AnswerError(InternalError):
    """The server answered something that is not what the API documents."""


_BY_CODE: dict[str, type[LivestateError]] = {
    "bad_request": InputError,
    "method_not_allowed": InputError,
    "payload_too_large": InputError,
    "unsupported_media_type": InputError,
    "not_implemented": InputError,
    "unauthenticated": Unauthenticated,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
    "request_timeout": Unavailable,
    "too_many_requests": Unavailable,
    "unavailable": Unavailable,
    "insufficient_storage": Unavailable,
    "internal": InternalError,
}

_CODE_OF_STATUS: dict[int, str] = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "too_many_requests",
    500: "internal",
    501: "not_implemented",
    503: "unavailable",
    507: "insufficient_storage",
}


def error_class(code: str) -> type[LivestateError]:
    """The class raised for an error ``code`` (an unknown code: :class:`LivestateError`)."""
    return _BY_CODE.get(code, LivestateError)


def from_answer(status: int, body: Any, text: str, retry_after: Optional[str] = None) -> LivestateError:
    """The error for an error answer: from the API's JSON body, or, for one that is not (a
    proxy's page, say), from its status and text."""
    after: Optional[float] = None
    if retry_after:
        try:
            after = float(retry_after)
        except ValueError:
            after = None
    if isinstance(body, dict) and isinstance(body.get("code"), str) and isinstance(body.get("message"), str):
        code = body["code"]
        retryable = bool(body.get("retryable", False))
        incident = body.get("incident")
        incident = incident if isinstance(incident, int) else None
        return error_class(code)(
            code,
            body["message"],
            retryable=retryable,
            status=status,
            incident=incident,
            retry_after=after,
            body=body,
        )
    code = _CODE_OF_STATUS.get(status, "bad_request" if 400 <= status < 500 else "internal")
    cls = error_class(code)
    message = text.strip()[:2000] or f"HTTP {status} with an empty body"
    return cls(code, message, retryable=issubclass(cls, Unavailable), status=status, retry_after=after, body=text)
