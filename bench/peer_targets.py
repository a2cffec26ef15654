"""How the bench runs each peer (bench/peers/): its store, schema, receiver and worker.

procrastinate and pgqueuer keep their queue in a PostgreSQL database of their own; the
Celery stack keeps its dedup keys in Redis and its queue in RabbitMQ (bench/celery_stack.py).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import celery_stack
from harness import PEERS_DIR, PY, Proc, db_name, pg_dsn, pg_recreate, run_checked, uvicorn_cmd
from tables import PGQUEUER_SQL, PROCRASTINATE_SQL, Probe, QueueReader, QueueSql, SqlQueueReader

PEERS = ("procrastinate", "pgqueuer", "celery")
PEER_SQL: dict[str, QueueSql] = {"procrastinate": PROCRASTINATE_SQL, "pgqueuer": PGQUEUER_SQL}
#: How long the Celery stack's receiver remembers a key. A day, as teams typically set it;
#: the late-redelivery probe runs its own receiver with a few seconds to show what happens
#: after it.
CELERY_DEDUP_TTL_S = 24 * 3600

#: Row counts after a receive run, by label (each must match the accepted answers).
RowCounter = Callable[[], Coroutine[Any, Any, dict[str, int]]]


def peer_db(peer: str) -> str:
    return db_name(peer)


def peer_env(
    peer: str, env: dict[str, str], pgqueuer_on_conflict: str, dedup_ttl_s: int | None = None
) -> dict[str, str]:
    own = {
        # procrastinate's and Celery's command lines import the app by its dotted path.
        "PYTHONPATH": str(PEERS_DIR),
    }
    if peer == "celery":
        own |= {
            "PEER_BROKER": celery_stack.BROKER,
            "PEER_REDIS": celery_stack.REDIS_URL,
            "PEER_PROGRESS": str(celery_stack.PROGRESS),
            "PEER_DEDUP_TTL": str(dedup_ttl_s or CELERY_DEDUP_TTL_S),
        }
    else:
        own |= {"PEER_DSN": pg_dsn(peer_db(peer)), "PEER_ON_CONFLICT": pgqueuer_on_conflict}
    return {**env, **own}


def _procrastinate(*args: str) -> list[str]:
    return [str(PY), "-m", "procrastinate", "--app", "procrastinate_peer.queue", *args]


def fresh_peer_db(peer: str, env: dict[str, str]) -> None:
    """Recreate the peer's own store (database and schema; or vhost and Redis database)."""
    if peer == "celery":
        celery_stack.fresh_celery()
        return
    pg_recreate(peer_db(peer))
    if peer == "procrastinate":
        cmd = _procrastinate("schema", "--apply")
    else:
        cmd = [str(PY), str(PEERS_DIR / "pgqueuer_peer.py"), "schema"]
    run_checked(cmd, env, f"{peer} schema install")


def peer_receiver(peer: str, port: int, env: dict[str, str], logfile: Path) -> Proc:
    return Proc(peer, uvicorn_cmd(f"{peer}_peer:app", port, PEERS_DIR), env, logfile)


def peer_worker(peer: str, concurrency: int, env: dict[str, str], logfile: Path) -> Proc:
    if peer == "procrastinate":
        cmd = _procrastinate("worker", "--concurrency", str(concurrency))
    elif peer == "celery":
        # Celery's guide for short tasks: no gossip, mingle or heartbeat between workers
        # (there is one), the solo pool (one process: the task runs in the worker itself).
        cmd = [
            str(PY), "-m", "celery", "-A", "celery_peer:queue", "worker", "--pool", "solo",
            "--loglevel", "WARNING", "--without-gossip", "--without-mingle",
            "--without-heartbeat", "-Q", celery_stack.QUEUE,
        ]  # fmt: skip
    else:
        cmd = [str(PY), str(PEERS_DIR / "pgqueuer_peer.py"), "worker"]
    return Proc(f"{peer}-worker", cmd, env, logfile)


async def peer_queue(peer: str) -> QueueReader:
    if peer == "celery":
        return celery_stack.CeleryQueueReader()
    return SqlQueueReader(await Probe.open_pg(peer_db(peer)), PEER_SQL[peer])


def peer_counter(peer: str) -> RowCounter:
    """What a peer's receiver stored: its jobs (and the Celery stack's dedup keys)."""

    async def count() -> dict[str, int]:
        if peer == "celery":
            return {
                "dedupe_keys": celery_stack.dedupe_keys(),
                "jobs": celery_stack.queued_messages(),
            }
        probe = await Probe.open_pg(peer_db(peer))
        try:
            return {"jobs": int(await probe.scalar(PEER_SQL[peer].rows))}
        finally:
            await probe.close()

    return count
