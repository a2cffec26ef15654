"""One batching helper under both batchers: callers wait, a flush takes at most
``max_batch`` of them, at most ``max_in_flight`` flushes overlap, every caller gets its
own answer."""

from __future__ import annotations

import asyncio

from hookinbox.batching import Batcher, answer
from hookinbox.receive.batcher import ReservationBatcher
from hookinbox.work.settling import SettleBatcher


class _Doubling(Batcher[int, int]):
    def __init__(self) -> None:
        super().__init__(max_batch=3, max_in_flight=2)
        self.batches: list[list[int]] = []
        self.overlapping = 0
        self.most_overlapping = 0
        self.release = asyncio.Event()
        self.two_flushing = asyncio.Event()

    async def _flush(self, batch: list[tuple[int, asyncio.Future[int]]]) -> None:
        self.batches.append([item for item, _ in batch])
        self.overlapping += 1
        self.most_overlapping = max(self.most_overlapping, self.overlapping)
        if len(self.batches) == 2:
            self.two_flushing.set()
        await self.release.wait()
        self.overlapping -= 1
        for item, future in batch:
            answer(future, item * 2)


async def test_flushes_are_bounded_in_size_and_in_number_and_answer_each_caller() -> None:
    batcher = _Doubling()
    callers = [asyncio.ensure_future(batcher.submit(n)) for n in range(8)]
    async with asyncio.timeout(5):
        await batcher.two_flushing.wait()
        for _ in range(5):  # a third flush would have started by now, were it allowed
            await asyncio.sleep(0)
        assert len(batcher.batches) == 2
        batcher.release.set()
        answers = await asyncio.gather(*callers)
    assert answers == [n * 2 for n in range(8)]
    assert batcher.batches == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert batcher.most_overlapping == 2


def test_the_receivers_and_the_workers_batchers_are_that_helper() -> None:
    assert issubclass(ReservationBatcher, Batcher) and issubclass(SettleBatcher, Batcher)
