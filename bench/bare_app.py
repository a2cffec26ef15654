"""The ceiling: a minimal Starlette app that reads the whole body and answers 200.

No verification, no parsing, no storage. Whatever a receiver adds on top of this costs
throughput; this is the most one uvicorn process on this machine can answer.

Run: uvicorn --app-dir bench bare_app:app --loop uvloop --http httptools --no-access-log
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

_OK = b'{"status":"ok"}'


async def receive(request: Request) -> Response:
    await request.body()
    return Response(_OK, media_type="application/json")


async def healthz(request: Request) -> Response:
    return Response(b"ok", media_type="text/plain")


app = Starlette(
    routes=[
        Route("/webhooks/{source}", receive, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
)
