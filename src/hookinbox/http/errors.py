"""The one place where errors become HTTP statuses.

Each error declares its status in :mod:`hookinbox.errors` (drawn in its tree); the
webhook endpoint, the API, the admin and the spans read it here, through
:func:`status_of`, and answer with :func:`error_body` (what every JSON refusal says).
"""

from __future__ import annotations

from starlette.responses import JSONResponse

from hookinbox.errors import AmbiguousId, HookinboxError
from hookinbox.logs import exception_fields

#: Seconds a provider is asked to wait before retrying after a 503.
RETRY_AFTER_SECONDS = 5
#: The code of a 500: something failed that no refusal names.
INTERNAL = "internal"


def unexpected_error_fields(exc: BaseException) -> dict[str, str]:
    """What a 500's log line says: the code, and the exception's class and where it was
    raised (:func:`~hookinbox.logs.exception_fields`: never its message or traceback)."""
    return {"error": INTERNAL, **exception_fields(exc)}


def status_of(exc: HookinboxError) -> int:
    """The HTTP status that answers ``exc``."""
    return exc.http_status


def asks_retry(exc: HookinboxError) -> bool:
    """A 503: the sender should come back (``Retry-After``)."""
    return status_of(exc) == 503


def is_server_error(exc: HookinboxError) -> bool:
    """A failure on hookinbox's side (5xx), not a refusal of what was sent."""
    return status_of(exc) >= 500


def is_refusal(exc: HookinboxError) -> bool:
    """An operator function refused (no such record, or not in a state it acts on):
    nothing changed."""
    return status_of(exc) in (404, 409)


def error_body(exc: HookinboxError) -> dict[str, object]:
    """What a JSON refusal says: its code (and, for an ambiguous id, the sources that
    hold it: names from the config)."""
    if isinstance(exc, AmbiguousId):
        return {"error": exc.code, "sources": list(exc.sources)}
    return {"error": exc.code}


def error_response(exc: HookinboxError) -> JSONResponse:
    headers = {"retry-after": str(RETRY_AFTER_SECONDS)} if asks_retry(exc) else None
    return JSONResponse(error_body(exc), status_code=status_of(exc), headers=headers)


def internal_error_response() -> JSONResponse:
    """A 500: a bug, logged by class and line (:func:`unexpected_error_fields`)."""
    return JSONResponse({"error": INTERNAL}, status_code=500)
