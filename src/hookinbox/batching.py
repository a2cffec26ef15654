"""Many concurrent callers, few round trips: the shape both of hookinbox's batchers share.

A caller hands an item to :meth:`Batcher.submit` and awaits its answer. After one turn
of the event loop (or ``wait_seconds``), a flush takes what waits (up to ``max_batch``)
and writes it in one call; up to ``max_in_flight`` flushes run at once, so the next
batch gathers while one is on its way to the store. What a flush writes, and how it
answers each caller, is the subclass's: the receiver's reservations
(:class:`~hookinbox.receive.batcher.ReservationBatcher`) and a worker's settlements
(:class:`~hookinbox.work.settling.SettleBatcher`).

With ``overlap_after``, a flush starts while others are on their way only once the
newest of them has been out that long, or once ``enough`` items wait: under light load
a few items that came apart gather behind a commit into one batch (a flush has a fixed
cost, for the store and for the caller's process, that a batch of one pays whole),
under heavy load a batch gathers ``enough`` at once and does not wait, and a stalled
commit holds the next batch back no longer than ``overlap_after``.
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Batcher(Generic[T, R]):
    """Collect items, flush them a batch at a time, resolve each caller's future."""

    def __init__(
        self,
        *,
        max_batch: int,
        max_in_flight: int,
        wait_seconds: float = 0.0,
        overlap_after: float = 0.0,
        enough: int = 8,
    ):
        self._max_batch = max_batch
        self._wait = wait_seconds
        self._max_in_flight = max_in_flight
        self._overlap_after = overlap_after
        self._enough = enough
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._in_flight = 0
        #: When each flush on its way left (loop time), for ``overlap_after``.
        self._flush_starts: list[float] = []
        self._scheduled = False
        #: The scheduled start of the next flush, and when it was asked for.
        self._handle: asyncio.Handle | None = None
        self._armed_at = 0.0
        self._tasks: set[asyncio.Task[None]] = set()
        #: The loop the batcher last ran on, kept between calls: asking asyncio for the
        #: running loop is a getpid() system call on CPython 3.11, three per item.
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def waiting(self) -> int:
        """Items handed over and not yet in a flush."""
        return len(self._pending)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None or not loop.is_running():
            loop = self._loop = asyncio.get_running_loop()
        return loop

    async def submit(self, item: T) -> R:
        future: asyncio.Future[R] = self._running_loop().create_future()
        self._pending.append((item, future))
        self._schedule()
        return await future

    async def _flush(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        """Write ``batch`` and settle every future in it (each one exactly once)."""
        raise NotImplementedError

    def _take(self) -> list[tuple[T, asyncio.Future[R]]]:
        """The next batch out of what waits: the first ``max_batch`` by default."""
        batch = self._pending[: self._max_batch]
        del self._pending[: self._max_batch]
        return batch

    def _released(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        """``batch``'s flush has ended (whatever its outcome)."""

    def _schedule(self) -> None:
        if self._scheduled:
            handle = self._handle
            if (
                self._overlap_after > 0
                and len(self._pending) >= self._enough
                and isinstance(handle, asyncio.TimerHandle)
                and self._due() <= self._running_loop().time()
            ):
                # Held back only by the flush on its way, and enough has gathered.
                handle.cancel()
                self._handle = self._running_loop().call_soon(self._start_flush)
            return
        if self._in_flight >= self._max_in_flight or not self._pending:
            return
        self._scheduled = True
        loop = self._running_loop()
        self._armed_at = loop.time()
        self._arm(loop)

    def _due(self) -> float:
        """When the next flush may start: ``wait_seconds`` after it was asked for, and
        (fewer than ``enough`` waiting) not before the newest flush on its way has been
        out ``overlap_after``."""
        due = self._armed_at + self._wait
        if self._overlap_after > 0 and self._flush_starts and len(self._pending) < self._enough:
            due = max(due, self._flush_starts[-1] + self._overlap_after)
        return due

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        due = self._due()
        if due > loop.time():
            self._handle = loop.call_at(due, self._start_flush)
        else:
            self._handle = loop.call_soon(self._start_flush)

    def _start_flush(self) -> None:
        self._scheduled = False
        self._handle = None
        if not self._pending or self._in_flight >= self._max_in_flight:
            return
        batch = self._take()
        if not batch:
            return
        self._in_flight += 1
        loop = self._running_loop()
        started = loop.time()
        self._flush_starts.append(started)
        task = loop.create_task(self._flush(batch))
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._flush_done(done, batch, started))
        self._schedule()

    def _flush_done(
        self, task: asyncio.Task[None], batch: list[tuple[T, asyncio.Future[R]]], started: float
    ) -> None:
        self._tasks.discard(task)
        self._released(batch)
        self._in_flight -= 1
        self._flush_starts.remove(started)
        handle = self._handle
        if isinstance(handle, asyncio.TimerHandle) and self._due() < handle.when():
            # The flush that held the next one back is done: it need not wait as long.
            handle.cancel()
            self._arm(self._running_loop())
        self._schedule()


def answer(future: asyncio.Future[R], value: R) -> None:
    """Resolve a caller's future unless it is already done (its caller gave up)."""
    if not future.done():
        future.set_result(value)


def refuse(future: asyncio.Future[R], exc: BaseException) -> None:
    """Fail a caller's future unless it is already done."""
    if not future.done():
        future.set_exception(exc)
