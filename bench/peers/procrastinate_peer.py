"""procrastinate as a webhook receiver and as a worker, the way a Python user would do it.

Receiver (Starlette under uvicorn, run by bench/run.py exactly like the hookinbox
targets): verify the Standard Webhooks signature (peers/signature.py), then defer one
no-op job with ``queueing_lock`` = the event id, procrastinate's own deduplication. A
second delivery of an id whose job is still waiting raises ``AlreadyEnqueued`` (a unique
violation inside ``procrastinate_defer_jobs``): the answer is 200 ``duplicate``. The
answer comes after the defer returned, i.e. after its commit (autocommit, one statement).

Schema and worker come from procrastinate's own command line, with this directory on
PYTHONPATH (the worker: one process, ``--concurrency`` jobs at a time, LISTEN/NOTIFY on,
the library's defaults otherwise):

    python -m procrastinate --app procrastinate_peer.queue schema --apply
    python -m procrastinate --app procrastinate_peer.queue worker --concurrency 4
    uvicorn --app-dir bench/peers procrastinate_peer:app ...

Environment: ``PEER_DSN`` (its own database) and ``BENCH_SECRET`` (a ``whsec_`` secret).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import procrastinate
from peer_app import accepted, duplicate, peer_app, unavailable
from procrastinate.exceptions import AlreadyEnqueued, ConnectorException
from signature import MAX_BODY, Refused, verify
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

#: The same pool size as the naive receiver's.
POOL_SIZE = 10

queue = procrastinate.App(
    connector=procrastinate.PsycopgConnector(
        conninfo=os.environ["PEER_DSN"], min_size=POOL_SIZE, max_size=POOL_SIZE
    )
)


@queue.task(name="noop")
async def noop(event_id: str, event_type: str | None, body: str) -> None:
    """Does nothing: the bench measures the queue, not the handler."""


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    async with queue.open_async():
        yield


async def receive(request: Request) -> Response:
    body = await request.body()
    if len(body) > MAX_BODY:
        return JSONResponse({"error": "too_large"}, status_code=413)
    try:
        event = verify(request.headers, body)
    except Refused as exc:
        return JSONResponse({"error": exc.code}, status_code=400)
    try:
        await noop.configure(queueing_lock=event.event_id).defer_async(
            event_id=event.event_id, event_type=event.event_type, body=body.decode()
        )
    except AlreadyEnqueued:
        return duplicate(event.event_id)
    except ConnectorException:
        return unavailable()
    return accepted(event.event_id)


app = peer_app(receive, lifespan)
