"""The one place where errors become HTTP statuses."""

from __future__ import annotations

from pathlib import PurePath

from starlette.responses import JSONResponse

from hookinbox.errors import HookinboxError

#: Seconds a provider is asked to wait before retrying after a 503.
RETRY_AFTER_SECONDS = 5
#: The code of a 500: something failed that no refusal names.
INTERNAL = "internal"


def unexpected_error_fields(exc: BaseException) -> dict[str, str]:
    """What a log line may say about an unexpected exception: its class and the file
    and line that raised it. Never its message nor a traceback: a message may quote
    the payload, and a traceback's frames hold the body and the headers."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f"{PurePath(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb else ""
    return {"error": INTERNAL, "exception": type(exc).__name__, "at": where}


def error_response(exc: HookinboxError) -> JSONResponse:
    headers = {"retry-after": str(RETRY_AFTER_SECONDS)} if exc.http_status == 503 else None
    return JSONResponse({"error": exc.code}, status_code=exc.http_status, headers=headers)
