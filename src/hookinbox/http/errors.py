"""The one place where errors become HTTP statuses."""

from __future__ import annotations

from starlette.responses import JSONResponse

from hookinbox.errors import HookinboxError

#: Seconds a provider is asked to wait before retrying after a 503.
RETRY_AFTER_SECONDS = 5


def error_response(exc: HookinboxError) -> JSONResponse:
    headers = {"retry-after": str(RETRY_AFTER_SECONDS)} if exc.http_status == 503 else None
    return JSONResponse({"error": exc.code}, status_code=exc.http_status, headers=headers)
