"""A small HTTP/1.1 load generator for the bench: pre-built raw requests over keep-alive.

wrk is closed-loop: a connection sends its next request when the previous answer is read,
so when the server slows down the load slows down with it. Two things here need other
shapes of load:

- ``send_each``: closed loop, but every request exactly once (fill a queue with N
  deliveries, no more, no fewer), on ``concurrency`` connections.
- ``send_paced``: open loop at a fixed rate (what wrk2 does): request k is due at
  ``t0 + k / rate`` whatever happened to the ones before it; it goes out on an idle
  connection, or a new one when all are busy (up to ``max_connections``). Its answer
  latency is counted from when it was *due*, not from when it could be sent, so a server
  that stalls is charged for the requests that queued behind the stall.

Answers are classified like bench/cycle.lua does: ``accepted``, ``duplicate``, other
200, non-200 by code, and socket errors. Only ``Content-Length`` framed answers are
understood (what uvicorn sends for these apps); anything else counts as an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

T = TypeVar("T")
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)


class ProtocolFailure(Exception):
    """The server's answer was not one this client understands, or the connection broke."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection with at most one request in flight."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.broken = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.broken = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(ProtocolFailure(f"connection lost: {exc}"))

    def data_received(self, data: bytes) -> None:
        self._buf += data
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self._buf[: end + 2])
        m = _CONTENT_LENGTH.search(head)
        if m is None or not head.startswith(b"HTTP/1."):
            self.broken = True
            waiter.set_exception(ProtocolFailure("answer without Content-Length"))
            return
        total = end + 4 + int(m.group(1))
        if len(self._buf) < total:
            return
        body = bytes(self._buf[end + 4 : total])
        del self._buf[:total]
        waiter.set_result((int(head[9:12]), body))

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        if self.transport is None or self.broken:
            raise ProtocolFailure("connection closed")
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(raw)
        return await self._waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def _connect(host: str, port: int) -> _Connection:
    loop = asyncio.get_running_loop()
    _, conn = await loop.create_connection(_Connection, host, port)
    return conn


@dataclass
class LoadResult:
    """What came back. Latencies are seconds, in the order the answers arrived."""

    sent: int = 0
    accepted: int = 0
    duplicate: int = 0
    ok_other: int = 0
    non200: Counter[int] = field(default_factory=Counter)
    socket_errors: int = 0
    latencies: list[float] = field(default_factory=list)
    elapsed_s: float = 0.0
    #: Open loop only: how late the most late request left (s) and how many left more than
    #: 5 ms after they were due (all connections busy, or this process too slow).
    max_send_lag_s: float = 0.0
    late_sends: int = 0
    connections: int = 0

    @property
    def errors(self) -> int:
        return sum(self.non200.values()) + self.socket_errors

    @property
    def ok(self) -> int:
        return self.accepted + self.duplicate + self.ok_other

    def count(self, status: int, body: bytes) -> None:
        if status != 200:
            self.non200[status] += 1
        elif b'"accepted"' in body:
            self.accepted += 1
        elif b'"duplicate"' in body:
            self.duplicate += 1
        else:
            self.ok_other += 1


async def send_each(
    host: str, port: int, requests: list[bytes], concurrency: int, timeout_s: float
) -> LoadResult:
    """Send every request exactly once, ``concurrency`` at a time; give up at ``timeout_s``."""
    result = LoadResult()
    pending: Iterator[bytes] = iter(requests)
    loop = asyncio.get_running_loop()

    async def lane() -> None:
        conn: _Connection | None = None
        for raw in pending:
            try:
                if conn is None or conn.broken:
                    conn = await _connect(host, port)
                    result.connections += 1
                started = loop.time()
                result.sent += 1
                status, body = await conn.request(raw)
                result.latencies.append(loop.time() - started)
                result.count(status, body)
            except (OSError, ProtocolFailure):
                result.socket_errors += 1
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()

    started = time.monotonic()
    lanes = [asyncio.ensure_future(lane()) for _ in range(max(1, concurrency))]
    try:
        await asyncio.wait_for(asyncio.gather(*lanes), timeout_s)
    except TimeoutError:
        for task in lanes:
            task.cancel()
        await asyncio.gather(*lanes, return_exceptions=True)
    result.elapsed_s = time.monotonic() - started
    return result


async def send_paced(
    host: str,
    port: int,
    requests: list[bytes],
    rate: float,
    *,
    max_connections: int = 256,
    warm_connections: int = 16,
    drain_timeout_s: float = 15.0,
) -> LoadResult:
    """Open loop: request k is due at t0 + k/rate. See the module docstring."""
    loop = asyncio.get_running_loop()
    result = LoadResult()
    idle: list[_Connection] = []
    opened = 0
    freed = asyncio.Event()

    async def acquire() -> _Connection:
        nonlocal opened
        while True:
            while idle:
                conn = idle.pop()
                if not conn.broken:
                    return conn
            if opened < max_connections:
                opened += 1
                try:
                    return await _connect(host, port)
                except OSError:
                    opened -= 1
                    raise
            freed.clear()
            await freed.wait()

    def release(conn: _Connection) -> None:
        nonlocal opened
        if conn.broken:
            opened -= 1
            conn.close()
        else:
            idle.append(conn)
        freed.set()

    async def one(raw: bytes, due: float) -> None:
        try:
            conn = await acquire()
        except OSError:
            result.socket_errors += 1
            return
        lag = loop.time() - due
        result.max_send_lag_s = max(result.max_send_lag_s, lag)
        result.late_sends += lag > 0.005
        try:
            status, body = await conn.request(raw)
        except ProtocolFailure:
            result.socket_errors += 1
            conn.broken = True
        else:
            result.latencies.append(loop.time() - due)
            result.count(status, body)
        finally:
            release(conn)

    for _ in range(min(warm_connections, max_connections)):
        opened += 1
        try:
            idle.append(await _connect(host, port))
        except OSError:
            opened -= 1
            result.socket_errors += 1
    in_flight: set[asyncio.Task[None]] = set()
    interval = 1.0 / rate
    t0 = loop.time() + 0.01
    started = time.monotonic()
    for k, raw in enumerate(requests):
        due = t0 + k * interval
        delay = due - loop.time()
        if delay > 0:
            # Timers fire with ~1 ms resolution; requests that came due meanwhile go
            # out back to back, each still timed from its own due time.
            await asyncio.sleep(delay)
        task = loop.create_task(one(raw, due))
        result.sent += 1
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
    if in_flight:
        _, late = await asyncio.wait(in_flight, timeout=drain_timeout_s)
        for task in late:
            task.cancel()
            result.socket_errors += 1
    result.elapsed_s = time.monotonic() - started
    result.connections = opened
    for conn in idle:
        conn.close()
    return result


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on a fresh event loop (uvloop when installed, as the servers use)."""
    factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    with contextlib.suppress(ImportError):
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of unsorted values; 0.0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]
