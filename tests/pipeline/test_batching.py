"""One batching helper under both batchers: callers wait, a flush takes at most
``max_batch`` of them, at most ``max_in_flight`` flushes overlap, every caller gets its
own answer; the receiver's ordered turns survive a cancelled waiter."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from hookinbox.batching import Batcher, answer
from hookinbox.ids import job_id, new_delivery_id
from hookinbox.receive.batcher import ReservationBatcher
from hookinbox.store import NewDelivery, NewJob, open_store_for
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


def _ordered(event_id: str) -> NewDelivery:
    delivery_id = new_delivery_id()
    return NewDelivery(
        id=delivery_id,
        source="test",
        event_id=event_id,
        event_type="t",
        body_sha256=hashlib.sha256(b"{}").hexdigest(),
        body=b"{}",
        headers={},
        jobs=(NewJob(job_id(delivery_id, "a"), "a", 3, "key", False),),
        max_attempts=3,
    )


async def test_an_ordered_turn_whose_waiter_is_cancelled_is_passed_on(tmp_path: Path) -> None:
    # An inline write holds the receiver's ordered turn; the next one waiting for it is
    # cancelled just as the first ends: the turn goes past it, to the batch after it.
    store = open_store_for(f"sqlite:///{tmp_path}/inbox.db")
    await store.open()
    try:
        batcher = ReservationBatcher(store, max_in_flight=1)
        release = asyncio.Event()

        async def held() -> str:
            await release.wait()
            return "written"

        async def never() -> str:
            raise AssertionError("a cancelled turn wrote")

        async with asyncio.timeout(10):
            first = asyncio.create_task(batcher.reserve_in_turn(_ordered("evt_1"), held))
            await asyncio.sleep(0)  # it takes the turn and waits in its write
            second = asyncio.create_task(batcher.reserve_in_turn(_ordered("evt_2"), never))
            await asyncio.sleep(0)  # it waits for the turn
            release.set()
            second.cancel()
            assert await first == "written"
            with pytest.raises(asyncio.CancelledError):
                await second
            third = await batcher.reserve(_ordered("evt_3"))
    finally:
        await store.close()
    assert third.outcome == "accepted"
