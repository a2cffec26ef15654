"""The reservation batcher: concurrent deliveries, few commits.

Each request hands its row to :meth:`ReservationBatcher.reserve` and awaits its answer.
The batcher writes everything waiting as one commit (the store's
``reserve_deliveries``), so a burst of N requests costs one round trip instead of N. No
request is answered before the commit that holds its row; a failed commit fails every
request of its batch with 503, and the provider retries. A row whose values the store
refuses fails alone (400); the rest of its batch is answered as if it had come alone.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from hookinbox.batching import Batcher, answer, refuse
from hookinbox.errors import HookinboxError, StoreUnavailable
from hookinbox.logs import get_logger
from hookinbox.store import NewDelivery, Reservation, Store

if TYPE_CHECKING:
    from hookinbox.metrics import Metrics

log = get_logger("hookinbox.ingest")

W = TypeVar("W")


class ReservationBatcher(Batcher[NewDelivery, Reservation]):
    """Group concurrent reservations into few commits; repeats inside a batch are folded.

    A flush takes everything waiting (up to ``max_batch``) after one turn of the event
    loop, so the requests that became ready together commit together. Up to
    ``max_in_flight`` flushes run at once: while one batch is on its way to the store,
    the next one gathers, and request parsing overlaps with the database round trip.
    With ``overlap_after``, a batch of fewer than ``enough`` waits that long for the one
    on its way (or until it is back): under light load, deliveries that came apart share
    a commit; a stalled commit holds back the next batch no longer than that.

    Deliveries that carry a job of an ordered route take turns: one batch of them (or one
    written alone, :meth:`reserve_in_turn`) is on its way at a time, and the next ones
    wait in the queue, gathering, without holding a slot. A worker claims an ordered job
    only when no earlier job of its key is in the table, so a later reservation that
    committed first could run first: in one process they commit in id order however long
    a commit takes; between processes the workers' ``order_grace_seconds`` covers it
    (docs/concepts/ordering.md). A stalled ordered commit holds one slot; the other
    batches keep going.

    With ``metrics``, each batch observes its size, how long it gathered (from the
    hand-off of the oldest delivery waiting to the batch leaving) and its commit: the
    parts of an answer's time spent here (``hookinbox_reserve_seconds``).
    """

    def __init__(
        self,
        store: Store,
        *,
        max_batch: int = 256,
        wait_seconds: float = 0.0,
        max_in_flight: int = 4,
        overlap_after: float = 0.0,
        ordered: bool = True,
        metrics: Metrics | None = None,
    ):
        super().__init__(
            max_batch=max_batch,
            max_in_flight=max_in_flight,
            wait_seconds=wait_seconds,
            overlap_after=overlap_after,
        )
        self._store = store
        #: Whether any delivery may carry an ordered job (else no turns are kept).
        self._ordered = ordered
        self._keys_in_flight: set[tuple[str, str]] = set()
        #: An ordered write (a batch or one written alone) is on its way to the store.
        self._ordered_busy = False
        #: Ordered deliveries written alone, waiting for their turn: (id, woken when it
        #: comes), in the order they came, which is id order.
        self._turns_waiting: collections.deque[tuple[str, asyncio.Future[None]]] = (
            collections.deque()
        )
        #: When the oldest delivery waiting was handed over (perf_counter), for the
        #: gathering time; kept for what a batch leaves behind (never younger than it).
        self._waiting_since = 0.0
        self._gathered: Callable[[float], None]
        self._committed: Callable[[float], None]
        self._sized: Callable[[float], None]
        if metrics is not None:
            self._gathered = metrics.reserve_seconds.labels("gather").observe
            self._committed = metrics.reserve_seconds.labels("commit").observe
            self._sized = metrics.reserve_batch_size.observe
        else:
            self._gathered = self._committed = self._sized = _ignore

    async def reserve(self, item: NewDelivery) -> Reservation:
        if not self._pending:
            self._waiting_since = time.perf_counter()
        return await self.submit(item)

    async def reserve_in_turn(self, item: NewDelivery, write: Callable[[], Awaitable[W]]) -> W:
        """``write`` reserves ``item`` by itself (an inline resource route's commit);
        if the delivery carries an ordered job, it takes its turn with the ordered
        batches: after those of earlier ids, before those of later ones."""
        if not _is_ordered(item):
            return await write()
        if (
            self._ordered_busy
            or self._turns_waiting
            or any(_is_ordered(it) and it.id < item.id for it, _ in self._pending)
        ):
            turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._turns_waiting.append((item.id, turn))
            try:
                await turn
            except asyncio.CancelledError:
                if turn.done() and not turn.cancelled():
                    self._end_turn()  # given the turn as it was cancelled: pass it on
                else:
                    with contextlib.suppress(ValueError):  # not passed over yet
                        self._turns_waiting.remove((item.id, turn))
                    self._next_turn()
                    self._schedule()
                raise
        else:
            self._ordered_busy = True
        try:
            return await write()
        finally:
            self._end_turn()

    def _end_turn(self) -> None:
        self._ordered_busy = False
        self._next_turn()
        self._schedule()

    def _next_turn(self) -> None:
        """No ordered write on its way: the first delivery waiting to be written alone
        goes, unless a batched one of an earlier id waits (the next batch takes it)."""
        waiting = self._turns_waiting
        while waiting and waiting[0][1].done():
            waiting.popleft()  # its caller was cancelled and has not woken yet
        if self._ordered_busy or not waiting:
            return
        first_id, turn = waiting[0]
        if any(_is_ordered(it) and it.id < first_id for it, _ in self._pending):
            return
        waiting.popleft()
        self._ordered_busy = True
        turn.set_result(None)

    def _take(self) -> list[tuple[NewDelivery, asyncio.Future[Reservation]]]:
        # An event already on its way to the store waits for that batch: two batches
        # touching the same journal row would only queue on its lock (or deadlock).
        # An ordered delivery waits while another ordered write is on its way, and for
        # the deliveries of earlier ids written alone.
        batch: list[tuple[NewDelivery, asyncio.Future[Reservation]]] = []
        held: list[tuple[NewDelivery, asyncio.Future[Reservation]]] = []
        keys: set[tuple[str, str]] = set()
        ordered_open = not self._ordered_busy
        before = self._turns_waiting[0][0] if self._turns_waiting else None
        for entry in self._pending:
            item = entry[0]
            key = (item.source, item.event_id)
            if len(batch) >= self._max_batch or key in self._keys_in_flight:
                held.append(entry)
                if self._ordered and _is_ordered(item):
                    ordered_open = False  # none after it may go before it
            elif self._ordered and _is_ordered(item):
                if ordered_open and (before is None or item.id < before):
                    batch.append(entry)
                    keys.add(key)
                    self._ordered_busy = True
                else:
                    held.append(entry)
            else:
                batch.append(entry)
                keys.add(key)
        self._pending = held
        self._keys_in_flight |= keys
        if batch:
            now = time.perf_counter()
            self._gathered(now - self._waiting_since)
            self._sized(len(batch))
            if not held:
                self._waiting_since = now
        return batch

    def _released(self, batch: list[tuple[NewDelivery, asyncio.Future[Reservation]]]) -> None:
        self._keys_in_flight -= {(item.source, item.event_id) for item, _ in batch}
        if self._ordered and any(_is_ordered(item) for item, _ in batch):
            self._ordered_busy = False
            self._next_turn()

    async def _flush(self, batch: list[tuple[NewDelivery, asyncio.Future[Reservation]]]) -> None:
        leaders: dict[tuple[str, str, str], NewDelivery] = {}
        followers: dict[tuple[str, str, str], int] = {}
        for item, _ in batch:
            key = (item.source, item.event_id, item.body_sha256)
            if key in leaders:
                followers[key] = followers.get(key, 0) + 1
            else:
                leaders[key] = item
        # Sorted by key: concurrent receivers then take journal row locks in one order.
        unique = [
            _with_seen(item, 1 + followers.get(key, 0)) if key in followers else item
            for key, item in sorted(leaders.items())
        ]
        started = time.perf_counter()
        try:
            answers = await self._store.journal.reserve_deliveries(unique)
            self._committed(time.perf_counter() - started)
            self._answer(batch, unique, answers)
        except HookinboxError as exc:
            failure = exc if isinstance(exc, StoreUnavailable) else StoreUnavailable()
            for _, future in batch:
                refuse(future, failure)
            log.error("reserve_failed", batch=len(batch), error=exc.code)
            return
        except BaseException as exc:
            for _, future in batch:
                refuse(future, StoreUnavailable())
            if isinstance(exc, asyncio.CancelledError):
                raise
            # No traceback: its frames' locals hold this batch's bodies and headers.
            log.error("reserve_crashed", batch=len(batch), error=type(exc).__name__)

    @staticmethod
    def _answer(
        batch: list[tuple[NewDelivery, asyncio.Future[Reservation]]],
        unique: list[NewDelivery],
        answers: Sequence[Reservation | HookinboxError],
    ) -> None:
        """Each caller its reply (inside the write's ``try``: a store whose replies do not
        match what was sent fails the batch's callers, never leaves them waiting)."""
        by_key = {
            (item.source, item.event_id, item.body_sha256): reply
            for item, reply in zip(unique, answers, strict=True)
        }
        for item, future in batch:
            found = by_key[(item.source, item.event_id, item.body_sha256)]
            if isinstance(found, HookinboxError):
                refuse(future, found)
            elif item.id != found.delivery_id and found.outcome == "accepted":
                # A repeat folded into this batch's first delivery of the same event.
                answer(future, Reservation("duplicate", found.delivery_id, False, item.body_sha256))
            else:
                answer(future, found)


def _is_ordered(item: NewDelivery) -> bool:
    return any(job.order_key for job in item.jobs)


def _ignore(value: float) -> None:
    """No metrics: nothing observed."""


def _with_seen(item: NewDelivery, seen: int) -> NewDelivery:
    return NewDelivery(
        id=item.id,
        source=item.source,
        event_id=item.event_id,
        event_type=item.event_type,
        body_sha256=item.body_sha256,
        body=item.body,
        headers=item.headers,
        jobs=item.jobs,
        max_attempts=item.max_attempts,
        seen=seen,
        subject_hash=item.subject_hash,
    )
