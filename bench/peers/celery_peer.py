"""The stack most Python teams would pick: a Starlette handler that deduplicates with Redis
``SET NX EX`` and enqueues a Celery task on RabbitMQ.

Receiver (Starlette under uvicorn, run by bench/run.py exactly like the other peers):
verify the Standard Webhooks signature (peers/signature.py), ``SET dedupe:<event id> 1 NX
EX <ttl>`` in Redis (redis-py's asyncio client, hiredis parser), and when the key was new,
``noop.delay(body)``: Celery's publish is synchronous, so it is called from the handler as
the FastAPI and Celery guides show, blocking the event loop for the publish. There is no
transaction between the key and the enqueue: a publish that fails after the key was set
loses the event (the provider's retry is then a "duplicate"), and the key is forgotten
after its TTL, when a late redelivery becomes a new job. The bench shows the second with a
short TTL (``PEER_DEDUP_TTL``, 2 s in the probe; teams typically keep 24 h).

Consumer: one Celery worker PROCESS in the configuration Celery's "Optimizing" guide gives
for many short tasks: the ``solo`` pool (the task runs in the worker process itself, so
"one worker process" is one process, as for the other peers), results ignored (no result
backend round trip), ``worker_prefetch_multiplier`` 256 (a deep prefetch for short tasks),
acknowledgement before execution (Celery's default; ``acks_late`` would cost a round trip
per task), persistent messages on a durable queue (hookinbox and the PostgreSQL peers are
durable too; transient messages would not be a like-for-like comparison). A finished task
bumps an in-process counter; a thread writes it to ``PEER_PROGRESS`` every 20 ms so the
bench can time the drain from the first job to the last without a round trip per task.

    celery -A celery_peer worker ...        (bench/peer_targets.py builds the command)
    uvicorn --app-dir bench/peers celery_peer:app ...

Environment: ``PEER_BROKER`` (an amqp:// URL with its own vhost), ``PEER_REDIS`` (a
redis:// URL with its own database), ``BENCH_SECRET``, ``PEER_DEDUP_TTL`` (seconds),
``PEER_PROGRESS`` (the worker's counter file).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import redis.asyncio as aioredis
from celery import Celery
from celery.signals import worker_ready
from peer_app import accepted, duplicate, peer_app, unavailable
from signature import MAX_BODY, Refused, verify
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

BROKER = os.environ.get("PEER_BROKER", "amqp://guest:guest@127.0.0.1:5672//")
REDIS = os.environ.get("PEER_REDIS", "redis://127.0.0.1:6379/11")
DEDUP_TTL = int(os.environ.get("PEER_DEDUP_TTL", str(24 * 3600)))
QUEUE = "hookinbox_bench"

queue = Celery("celery_peer", broker=BROKER)
queue.conf.update(
    task_ignore_result=True,
    task_default_queue=QUEUE,
    worker_prefetch_multiplier=256,
    task_acks_late=False,
    worker_send_task_events=False,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)

_done = 0


@queue.task(name="noop")
def noop(body: str) -> None:
    """Does nothing but count: the bench measures the queue, not the handler."""
    global _done
    _done += 1


def _write_progress(path: Path) -> None:
    """The counter to a file every 20 ms (atomic rename), for the bench's poll."""
    tmp = path.with_suffix(".tmp")
    while True:
        tmp.write_text(str(_done))
        tmp.replace(path)
        time.sleep(0.02)


@worker_ready.connect
def _start_progress(**_: object) -> None:
    target = os.environ.get("PEER_PROGRESS")
    if target:
        threading.Thread(target=_write_progress, args=(Path(target),), daemon=True).start()


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    app.state.redis = aioredis.from_url(REDIS)
    try:
        yield
    finally:
        await app.state.redis.aclose()


async def receive(request: Request) -> Response:
    body = await request.body()
    if len(body) > MAX_BODY:
        return JSONResponse({"error": "too_large"}, status_code=413)
    try:
        event = verify(request.headers, body)
    except Refused as exc:
        return JSONResponse({"error": exc.code}, status_code=400)
    try:
        fresh = await request.app.state.redis.set(
            f"dedupe:{event.event_id}", 1, nx=True, ex=DEDUP_TTL
        )
        if not fresh:
            return duplicate(event.event_id)
        noop.delay(body.decode())
    except Exception:
        return unavailable()
    return accepted(event.event_id)


app = peer_app(receive, lifespan)
