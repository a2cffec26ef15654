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
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from hookinbox.batching import Batcher, answer, refuse
from hookinbox.errors import HookinboxError, StoreUnavailable
from hookinbox.logs import get_logger
from hookinbox.store import NewDelivery, Reservation, Store

if TYPE_CHECKING:
    from hookinbox.metrics import Metrics

log = get_logger("hookinbox.ingest")


class ReservationBatcher(Batcher[NewDelivery, Reservation]):
    """Group concurrent reservations into few commits; repeats inside a batch are folded.

    A flush takes everything waiting (up to ``max_batch``) after one turn of the event
    loop, so the requests that became ready together commit together. Up to
    ``max_in_flight`` flushes run at once: while one batch is on its way to the store,
    the next one gathers, and request parsing overlaps with the database round trip.

    A batch that carries a job of an ordered route commits after the batch before it
    that carried one: a worker claims an ordered job only when no earlier job of its key
    is in the table, so a later reservation that committed first could run first. In one
    process they then commit in id order however long a commit takes; between processes
    the workers' ``order_grace_seconds`` covers it (docs/concepts/ordering.md). Other
    batches are not held.

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
        metrics: Metrics | None = None,
    ):
        super().__init__(
            max_batch=max_batch, max_in_flight=max_in_flight, wait_seconds=wait_seconds
        )
        self._store = store
        self._keys_in_flight: set[tuple[str, str]] = set()
        #: Done when the last batch that carried an ordered job has committed (or failed).
        self._ordered_tail: asyncio.Future[None] | None = None
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

    def _take(self) -> list[tuple[NewDelivery, asyncio.Future[Reservation]]]:
        # An event already on its way to the store waits for that batch: two batches
        # touching the same journal row would only queue on its lock (or deadlock).
        batch: list[tuple[NewDelivery, asyncio.Future[Reservation]]] = []
        held: list[tuple[NewDelivery, asyncio.Future[Reservation]]] = []
        keys: set[tuple[str, str]] = set()
        for entry in self._pending:
            key = (entry[0].source, entry[0].event_id)
            if len(batch) >= self._max_batch or key in self._keys_in_flight:
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

    async def _flush(self, batch: list[tuple[NewDelivery, asyncio.Future[Reservation]]]) -> None:
        if not any(job.order_key for item, _ in batch for job in item.jobs):
            await self._write(batch)
            return
        # Flushes start in the order their batches were taken, which is id order; this
        # runs before the first await, so each waits for the one taken before it.
        before, done = self._ordered_tail, asyncio.get_running_loop().create_future()
        self._ordered_tail = done
        try:
            if before is not None:
                try:
                    # Shielded: a cancelled waiter must not cancel the batch before it.
                    await asyncio.shield(before)
                except asyncio.CancelledError:
                    for _, future in batch:
                        refuse(future, StoreUnavailable())
                    raise
            await self._write(batch)
        finally:
            if not done.done():
                done.set_result(None)
            if self._ordered_tail is done:
                self._ordered_tail = None

    async def _write(self, batch: list[tuple[NewDelivery, asyncio.Future[Reservation]]]) -> None:
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
            return
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
