"""The Celery peer's services: RabbitMQ and Redis of this machine, a vhost and a database
of the bench's own, and how the bench reads the peer's queue.

RabbitMQ and Redis are started (with the commands this machine documents) when they are
not answering; the bench never stops them. Each bench run gets a vhost
``hookinbox_bench_<RUN_TAG>`` (deleted at the end) and Redis database ``REDIS_DB``
(flushed before each fresh peer and at the end). The queue is read with kombu (a passive
declare: the messages waiting, which before the worker starts is the whole queue) and
through the worker's progress file (tasks it ran).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from harness import RUN_TAG, Unavailable, log

VHOST = f"hookinbox_bench_{RUN_TAG}"
REDIS_DB = 13
BROKER = f"amqp://guest:guest@127.0.0.1:5672/{VHOST}"
REDIS_URL = f"redis://127.0.0.1:6379/{REDIS_DB}"
QUEUE = "hookinbox_bench"
PROGRESS = Path(tempfile.gettempdir()) / f"hookinbox-bench-{RUN_TAG}-celery.progress"
START_TIMEOUT_S = 60.0

_vhost_made = False

#: How this machine starts each service when it has stopped (its environment notes).
_START = {
    6379: [
        "redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379",
        "--save", "", "--appendonly", "no", "--dir", "/var/lib/redis",
        "--logfile", "/var/log/redis/ci.log",
    ],
    5672: ["rabbitmq-server", "-detached"],
}  # fmt: skip


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def _ensure_service(port: int) -> None:
    if _listening(port):
        return
    cmd = _START[port]
    if shutil.which(cmd[0]) is None:
        raise Unavailable(f"{cmd[0]} is not installed and nothing listens on :{port}")
    log(f"[celery] starting {cmd[0]} (nothing listened on :{port})")
    subprocess.run(cmd, check=False, capture_output=True, timeout=60)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if _listening(port):
            return
        time.sleep(0.5)
    raise Unavailable(f"{cmd[0]} did not listen on :{port} within {START_TIMEOUT_S:.0f} s")


def _ctl(*args: str) -> None:
    done = subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise Unavailable(f"rabbitmqctl {args[0]}: {done.stderr.strip()[-300:]}")


def _redis_flush() -> None:
    import redis

    with redis.Redis.from_url(REDIS_URL) as client:
        client.flushdb()


def fresh_celery() -> None:
    """Services up, an empty vhost of the bench's own, an empty Redis database."""
    global _vhost_made
    _ensure_service(6379)
    _ensure_service(5672)
    if _vhost_made:
        _ctl("delete_vhost", VHOST)
    _ctl("add_vhost", VHOST)
    _vhost_made = True
    _ctl("set_permissions", "-p", VHOST, "guest", ".*", ".*", ".*")
    _redis_flush()
    PROGRESS.unlink(missing_ok=True)


def drop_celery() -> None:
    """Remove what the bench made: its vhost, its Redis database's keys, the progress file."""
    global _vhost_made
    PROGRESS.unlink(missing_ok=True)
    if not _vhost_made:
        return
    _vhost_made = False
    with contextlib.suppress(Exception):
        _ctl("delete_vhost", VHOST)
    with contextlib.suppress(Exception):
        _redis_flush()


def queued_messages() -> int:
    """Messages waiting in the bench's queue (0 when the queue does not exist yet)."""
    from kombu import Connection

    with Connection(BROKER, connect_timeout=5) as conn:
        channel = conn.channel()
        try:
            return int(channel.queue_declare(QUEUE, passive=True).message_count)
        except Exception:
            return 0
        finally:
            with contextlib.suppress(Exception):
                channel.close()


def dedupe_keys() -> int:
    import redis

    with redis.Redis.from_url(REDIS_URL) as client:
        return int(client.dbsize())


def tasks_done() -> int | None:
    """What the worker's progress file says it ran (None before its first write)."""
    try:
        return int(PROGRESS.read_text() or 0)
    except (OSError, ValueError):
        return None


class CeleryQueueReader:
    """The drain's view of the Celery queue: the messages queued before the worker started
    (the first call is made then), less the tasks the worker has run."""

    def __init__(self) -> None:
        self._queued: int | None = None

    async def unfinished(self) -> int:
        # Read once, before the worker starts: once it runs, its prefetched messages are
        # no longer "waiting" in the broker's count, though not done yet.
        if self._queued is None:
            self._queued = queued_messages()
        return max(0, self._queued - (tasks_done() or 0))

    async def done(self) -> int:
        return tasks_done() or 0

    async def failed(self) -> int | None:
        return None

    async def close(self) -> None:
        return None
