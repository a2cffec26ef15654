"""The one place where errors become HTTP statuses."""

from __future__ import annotations

from starlette.responses import JSONResponse

from hookinbox.errors import HookinboxError
from hookinbox.logs import exception_fields

#: Seconds a provider is asked to wait before retrying after a 503.
RETRY_AFTER_SECONDS = 5
#: The code of a 500: something failed that no refusal names.
INTERNAL = "internal"


def unexpected_error_fields(exc: BaseException) -> dict[str, str]:
    """What a 500's log line says: the code, and the exception's class and where it was
    raised (:func:`~hookinbox.logs.exception_fields`: never its message or traceback)."""
    return {"error": INTERNAL, **exception_fields(exc)}


def error_response(exc: HookinboxError) -> JSONResponse:
    headers = {"retry-after": str(RETRY_AFTER_SECONDS)} if exc.http_status == 503 else None
    return JSONResponse({"error": exc.code}, status_code=exc.http_status, headers=headers)
