"""What every peer receiver shares: its answers, its health route and its Starlette app.
Each peer writes only how it deduplicates and enqueues (``receive``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def accepted(event_id: str) -> Response:
    return JSONResponse({"status": "accepted", "event_id": event_id})


def duplicate(event_id: str) -> Response:
    return JSONResponse({"status": "duplicate", "event_id": event_id})


def unavailable() -> Response:
    """The peer's store or broker refused the enqueue: the provider retries later."""
    return JSONResponse(
        {"error": "store_unavailable"}, status_code=503, headers={"Retry-After": "5"}
    )


async def healthz(request: Request) -> Response:
    return Response(b"ok", media_type="text/plain")


def peer_app(
    receive: Callable[[Request], Awaitable[Response]],
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[Any]],
) -> Starlette:
    return Starlette(
        routes=[
            Route("/webhooks/{source}", receive, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
