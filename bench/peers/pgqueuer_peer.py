"""pgqueuer as a webhook receiver and as a consumer, the way a Python user would do it.

Receiver (Starlette under uvicorn, run by bench/run.py exactly like the hookinbox
targets): verify the Standard Webhooks signature (peers/signature.py), then enqueue one
no-op job with ``dedupe_key`` = the event id, pgqueuer's own deduplication (a unique
index over the keys of queued and picked jobs). ``PEER_ON_CONFLICT`` picks what a repeat
does: ``skip`` (the default here; pgqueuer >= 1.2: ``INSERT ... ON CONFLICT DO NOTHING``,
the job id comes back as None) or ``raise`` (pgqueuer's own default: a unique violation,
``DuplicateJobError``). Either way the answer is 200 ``duplicate``, after the enqueue
statement committed (autocommit, one statement).

Consumer: one ``QueueManager`` in the configuration pgqueuer's "Performance Tuning" guide
gives for throughput with short jobs: a connection-pool driver
(``AsyncpgPoolDriver``, pool of 5..20, the guide's example) and a larger ``batch_size``
(``PEER_BATCH_SIZE``, 100 here: "increase batch_size when jobs are short-lived"; its
default is 10), no cap on jobs in flight, LISTEN/NOTIFY, durable tables (pgqueuer's
default durability, as hookinbox's). ``PEER_BATCH_SIZE=10 PEER_SINGLE_CONNECTION=1``
runs it with its defaults instead (one connection, ``AsyncpgDriver``).

    python bench/peers/pgqueuer_peer.py schema
    python bench/peers/pgqueuer_peer.py worker
    uvicorn --app-dir bench/peers pgqueuer_peer:app ...

Environment: ``PEER_DSN`` (its own database) and ``BENCH_SECRET`` (a ``whsec_`` secret).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from peer_app import accepted, duplicate, peer_app, unavailable
from pgqueuer import AsyncpgDriver, AsyncpgPoolDriver, Job, Queries, QueueManager
from pgqueuer.domain.errors import DuplicateJobError
from signature import MAX_BODY, Refused, verify
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

#: The same pool size as the naive receiver's.
POOL_SIZE = 10
DSN = os.environ["PEER_DSN"]
ON_CONFLICT = os.environ.get("PEER_ON_CONFLICT", "skip")
if ON_CONFLICT not in ("skip", "raise"):
    raise SystemExit("PEER_ON_CONFLICT must be skip or raise")
ENTRYPOINT = "noop"
BATCH_SIZE = int(os.environ.get("PEER_BATCH_SIZE", "100"))
SINGLE_CONNECTION = os.environ.get("PEER_SINGLE_CONNECTION") == "1"


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    pool = await asyncpg.create_pool(DSN, min_size=POOL_SIZE, max_size=POOL_SIZE)
    app.state.queries = Queries(AsyncpgPoolDriver(pool))
    try:
        yield
    finally:
        await pool.close()


async def receive(request: Request) -> Response:
    body = await request.body()
    if len(body) > MAX_BODY:
        return JSONResponse({"error": "too_large"}, status_code=413)
    try:
        event = verify(request.headers, body)
    except Refused as exc:
        return JSONResponse({"error": exc.code}, status_code=400)
    queries: Queries = request.app.state.queries
    try:
        if ON_CONFLICT == "skip":
            ids = await queries.enqueue(
                ENTRYPOINT, body, dedupe_key=event.event_id, on_conflict="skip"
            )
            if ids[0] is None:
                return duplicate(event.event_id)
        else:
            await queries.enqueue(ENTRYPOINT, body, dedupe_key=event.event_id)
    except DuplicateJobError:
        return duplicate(event.event_id)
    except (OSError, asyncpg.PostgresError):
        return unavailable()
    return accepted(event.event_id)


app = peer_app(receive, lifespan)


async def install() -> None:
    conn = await asyncpg.connect(DSN)
    try:
        await Queries(AsyncpgDriver(conn)).install()
    finally:
        await conn.close()


async def work() -> None:
    """Consume until SIGTERM/SIGINT, then let running jobs finish (``qm.shutdown``)."""
    conn: asyncpg.Connection | None = None
    pool: asyncpg.Pool | None = None
    if SINGLE_CONNECTION:
        conn = await asyncpg.connect(DSN)
        driver: AsyncpgDriver | AsyncpgPoolDriver = AsyncpgDriver(conn)
    else:
        pool = await asyncpg.create_pool(DSN, min_size=5, max_size=20)
        driver = AsyncpgPoolDriver(pool)
    try:
        qm = QueueManager(Queries(driver))

        @qm.entrypoint(ENTRYPOINT)
        async def noop(job: Job) -> None:
            """Does nothing: the bench measures the queue, not the handler."""

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, qm.shutdown.set)
        await qm.run(batch_size=BATCH_SIZE)
    finally:
        if conn is not None:
            await conn.close()
        if pool is not None:
            await pool.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("schema", help="install pgqueuer's tables in PEER_DSN")
    sub.add_parser("worker", help="run one consumer until SIGTERM")
    args = ap.parse_args()
    asyncio.run(install() if args.command == "schema" else work())
    return 0


if __name__ == "__main__":
    sys.exit(main())
