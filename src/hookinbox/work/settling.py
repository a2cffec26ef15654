"""The settle batcher: a worker's finished attempts, few commits.

Each job hands its :class:`~hookinbox.store.Settlement` to :meth:`SettleBatcher.settle`
and awaits whether its lease was still ours. One flusher writes everything waiting after
one turn of the event loop as one call to ``store.queue.settle_jobs`` (ONE statement on
PostgreSQL, one commit on SQLite's writer thread), so the jobs that finished together
settle together: a worker pays a round trip per batch instead of one per job, the way the
receiver's :class:`~hookinbox.receive.batcher.ReservationBatcher` pays one per batch of
deliveries. The lease check stays per job, inside the statement.

A slow handler never holds a batch back: only finished attempts are waiting here. A
batch the store cannot commit goes again one settlement at a time, each tried a few
times, so one value the store refuses (a business id it cannot take) fails only its own
job; a settlement that still fails leaves its lease to expire and the job runs again
(the effects ledger keeps its effects single).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from hookinbox.batching import Batcher, answer, refuse
from hookinbox.codes import error_code_of
from hookinbox.logs import get_logger
from hookinbox.store import Settlement, Store

log = get_logger("hookinbox.worker")

#: Pauses before each further try of a settlement whose batch the store could not commit
#: (about 3.6 s in all: well inside any lease, so a job is not claimed again meanwhile).
_RETRY_DELAYS = (0.1, 0.5, 1.0, 2.0)


class SettleBatcher(Batcher[Settlement, bool]):
    """Group concurrent settlements into few commits.

    Up to ``max_in_flight`` batches are on their way to the store at once, so the next
    batch gathers while one commits. ``settle_batch`` writes a batch the first time
    (default ``store.queue.settle_jobs``; a worker's also claims the slots the batch
    freed, in the same statement); a batch that fails goes again one by one through
    ``store.queue.settle_jobs``.
    """

    def __init__(
        self,
        store: Store,
        *,
        settle_batch: Callable[[Sequence[Settlement]], Awaitable[list[bool]]] | None = None,
        max_batch: int = 512,
        max_in_flight: int = 2,
    ) -> None:
        super().__init__(max_batch=max_batch, max_in_flight=max_in_flight)
        self._store = store
        self._settle_batch = settle_batch or store.queue.settle_jobs

    async def settle(self, settlement: Settlement) -> bool:
        """Whether the settlement applied (False: the lease was lost to another worker).
        Raises the store's error when the batch could not be committed."""
        return await self.submit(settlement)

    async def _flush(self, batch: list[tuple[Settlement, asyncio.Future[bool]]]) -> None:
        settlements = [settlement for settlement, _ in batch]
        try:
            answers = await self._settle_batch(settlements)
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as exc:
            log.warning("settle_batch_failed", batch=len(batch), error=error_code_of(exc))
            # Never poisoned by one row (a business id the store cannot take): each goes
            # again alone, with its own retries.
            await asyncio.gather(*(self._flush_alone(entry) for entry in batch))
            return
        for (_, future), ours in zip(batch, answers, strict=True):
            answer(future, ours)

    async def _flush_alone(self, entry: tuple[Settlement, asyncio.Future[bool]]) -> None:
        settlement, future = entry
        failure: Exception | None = None
        for delay in _RETRY_DELAYS:
            await asyncio.sleep(delay)
            try:
                (ours,) = await self._store.queue.settle_jobs([settlement])
            except Exception as exc:
                failure = exc
                continue
            answer(future, ours)
            return
        refuse(future, failure or RuntimeError("settle failed"))
