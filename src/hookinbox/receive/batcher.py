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

from hookinbox.errors import HookinboxError, StoreUnavailable
from hookinbox.logs import get_logger
from hookinbox.store import NewDelivery, Reservation, Store

log = get_logger("hookinbox.ingest")


class ReservationBatcher:
    """Group concurrent reservations into few commits; repeats inside a batch are folded.

    A flush takes everything waiting (up to ``max_batch``) after one turn of the event
    loop, so the requests that became ready together commit together. Up to
    ``max_in_flight`` flushes run at once: while one batch is on its way to the store,
    the next one gathers, and request parsing overlaps with the database round trip.
    """

    def __init__(
        self,
        store: Store,
        *,
        max_batch: int = 256,
        wait_seconds: float = 0.0,
        max_in_flight: int = 4,
    ):
        self._store = store
        self._max_batch = max_batch
        self._wait = wait_seconds
        self._max_in_flight = max_in_flight
        self._pending: list[tuple[NewDelivery, asyncio.Future[Reservation]]] = []
        self._in_flight = 0
        self._scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._keys_in_flight: set[tuple[str, str]] = set()

    async def reserve(self, item: NewDelivery) -> Reservation:
        future: asyncio.Future[Reservation] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        self._schedule()
        return await future

    def _schedule(self) -> None:
        if self._scheduled or self._in_flight >= self._max_in_flight or not self._pending:
            return
        self._scheduled = True
        loop = asyncio.get_running_loop()
        if self._wait > 0:
            loop.call_later(self._wait, self._start_flush)
        else:
            loop.call_soon(self._start_flush)

    def _start_flush(self) -> None:
        self._scheduled = False
        if not self._pending or self._in_flight >= self._max_in_flight:
            return
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
        if not batch:
            return
        self._keys_in_flight |= keys
        self._in_flight += 1
        task = asyncio.get_running_loop().create_task(self._flush(batch))
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._flush_done(done, keys))
        self._schedule()

    def _flush_done(self, task: asyncio.Task[None], keys: set[tuple[str, str]]) -> None:
        self._tasks.discard(task)
        self._keys_in_flight -= keys
        self._in_flight -= 1
        self._schedule()

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
        try:
            answers = await self._store.journal.reserve_deliveries(unique)
        except HookinboxError as exc:
            failure = exc if isinstance(exc, StoreUnavailable) else StoreUnavailable()
            for _, future in batch:
                if not future.done():
                    future.set_exception(failure)
            log.error("reserve_failed", batch=len(batch), error=exc.code)
            return
        except BaseException as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(StoreUnavailable())
            if isinstance(exc, asyncio.CancelledError):
                raise
            # No traceback: its frames' locals hold this batch's bodies and headers.
            log.error("reserve_crashed", batch=len(batch), error=type(exc).__name__)
            return
        by_key = {
            (item.source, item.event_id, item.body_sha256): answer
            for item, answer in zip(unique, answers, strict=True)
        }
        for item, future in batch:
            answer = by_key[(item.source, item.event_id, item.body_sha256)]
            if isinstance(answer, HookinboxError):
                if not future.done():
                    future.set_exception(answer)
                continue
            if item.id != answer.delivery_id and answer.outcome == "accepted":
                # A repeat folded into this batch's first delivery of the same event.
                answer = Reservation("duplicate", answer.delivery_id, False, item.body_sha256)
            if not future.done():
                future.set_result(answer)


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
    )
