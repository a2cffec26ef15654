"""``/healthz`` says the process is alive; ``/readyz`` that the store answers now."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from hookinbox.errors import HookinboxError, StoreUnavailable
from hookinbox.http.errors import error_response
from hookinbox.store import Store


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def readyz_endpoint(store: Store) -> Any:
    async def readyz(request: Request) -> Response:
        try:
            await asyncio.wait_for(store.ping(), 3)
        except (HookinboxError, TimeoutError) as exc:
            failure = exc if isinstance(exc, HookinboxError) else StoreUnavailable()
            return error_response(failure)
        return JSONResponse({"status": "ready"})

    return readyz
