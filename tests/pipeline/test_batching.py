"""One batching helper under both batchers: callers wait, a flush takes at most
``max_batch`` of them, at most ``max_in_flight`` flushes overlap, every caller gets its
own answer; the receiver's ordered turns survive a cancelled waiter."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
import structlog

from hookinbox.batching import Batcher, answer
from hookinbox.errors import StoreUnavailable
from hookinbox.receive.batcher import ReservationBatcher
from hookinbox.store import NewDelivery, Reservation, open_store_for
from hookinbox.work.settling import SettleBatcher
from tests.support.journal import keyed_delivery


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


class _Held(Batcher[int, int]):
    """Each flush waits until its own release; flushes are noted as they start."""

    def __init__(self, overlap_after: float, enough: int = 8) -> None:
        super().__init__(max_batch=100, max_in_flight=4, overlap_after=overlap_after, enough=enough)
        self.batches: list[list[int]] = []
        self.releases: list[asyncio.Event] = []
        self.started = asyncio.Condition()

    async def _flush(self, batch: list[tuple[int, asyncio.Future[int]]]) -> None:
        release = asyncio.Event()
        async with self.started:
            self.batches.append([item for item, _ in batch])
            self.releases.append(release)
            self.started.notify_all()
        await release.wait()
        for item, future in batch:
            answer(future, item)

    async def flushes(self, count: int) -> None:
        async with self.started:
            await self.started.wait_for(lambda: len(self.batches) >= count)


async def test_a_batch_gathers_behind_a_commit_of_usual_length() -> None:
    batcher = _Held(overlap_after=60.0)
    async with asyncio.timeout(5):
        first = asyncio.ensure_future(batcher.submit(0))
        await batcher.flushes(1)
        behind = [asyncio.ensure_future(batcher.submit(n)) for n in range(1, 6)]
        for _ in range(5):  # a second flush would have started by now, were it allowed
            await asyncio.sleep(0)
        assert batcher.batches == [[0]]
        batcher.releases[0].set()  # back before the overlap: the rest leave as one batch
        await batcher.flushes(2)
        batcher.releases[1].set()
        assert await asyncio.gather(first, *behind) == list(range(6))
    assert batcher.batches == [[0], [1, 2, 3, 4, 5]]


async def test_a_batch_that_has_gathered_enough_leaves_without_waiting_for_the_commit() -> None:
    batcher = _Held(overlap_after=60.0, enough=3)
    async with asyncio.timeout(5):
        first = asyncio.ensure_future(batcher.submit(0))
        await batcher.flushes(1)
        two = [asyncio.ensure_future(batcher.submit(n)) for n in (1, 2)]
        for _ in range(5):  # two are not enough: they wait for the first commit
            await asyncio.sleep(0)
        assert batcher.batches == [[0]]
        third = asyncio.ensure_future(batcher.submit(3))
        await batcher.flushes(2)  # three are: they leave with the first still out
        batcher.releases[1].set()
        assert await asyncio.gather(*two, third) == [1, 2, 3]
        assert not first.done()
        batcher.releases[0].set()
        assert await first == 0
    assert batcher.batches == [[0], [1, 2, 3]]


async def test_a_stalled_commit_holds_the_batches_behind_it_no_longer_than_the_overlap() -> None:
    batcher = _Held(overlap_after=0.05)
    async with asyncio.timeout(5):
        stalled = asyncio.ensure_future(batcher.submit(0))
        await batcher.flushes(1)
        behind = [asyncio.ensure_future(batcher.submit(n)) for n in range(1, 4)]
        await batcher.flushes(2)  # the first never comes back, and these go anyway
        batcher.releases[1].set()
        assert await asyncio.gather(*behind) == [1, 2, 3]
        assert not stalled.done()
        batcher.releases[0].set()
        assert await stalled == 0
    assert batcher.batches == [[0], [1, 2, 3]]


def test_the_receivers_and_the_workers_batchers_are_that_helper() -> None:
    assert issubclass(ReservationBatcher, Batcher) and issubclass(SettleBatcher, Batcher)


def _ordered(event_id: str, *, key: str | None = "key", body: bytes = b"{}") -> NewDelivery:
    return keyed_delivery(event_id, key, body=body, source="test")


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


class _StalledJournal:
    """The store's side of the receiver's batches, for their order alone: the first write
    waits until ``release``; each write's events are noted when it commits."""

    def __init__(self) -> None:
        self.journal = self
        self.release = asyncio.Event()
        self.writing = asyncio.Event()
        self.committed: list[str] = []

    async def reserve_deliveries(self, items: list[NewDelivery]) -> list[Reservation]:
        if not self.writing.is_set():
            self.writing.set()
            await self.release.wait()
        self.committed.extend(item.event_id for item in items)
        return [Reservation("accepted", item.id, False, item.body_sha256) for item in items]


async def test_an_ordered_delivery_held_behind_its_event_keeps_later_ordered_ones_behind_it() -> (
    None
):
    # The same event twice, the first copy unordered (a filter or key the second body
    # changes) and on its way to the store: the second copy waits for it, and so must an
    # ordered delivery of a later id, however many batch places are free.
    store = _StalledJournal()
    batcher = ReservationBatcher(store, max_in_flight=4)  # type: ignore[arg-type]
    async with asyncio.timeout(10):
        first_copy = asyncio.create_task(batcher.reserve(_ordered("evt_e", key=None)))
        await store.writing.wait()
        second_copy = _ordered("evt_e", body=b'{"changed": 1}')
        later = _ordered("evt_f")
        waiting = [asyncio.create_task(batcher.reserve(item)) for item in (second_copy, later)]
        for _ in range(5):  # a batch of the later one would have been written by now
            await asyncio.sleep(0)
        store.release.set()
        await asyncio.gather(first_copy, *waiting)
    assert store.committed == ["evt_e", "evt_e", "evt_f"]


class _MismatchedJournal:
    """A store that breaks its contract: fewer replies than deliveries."""

    def __init__(self) -> None:
        self.journal = self

    async def reserve_deliveries(self, items: list[NewDelivery]) -> list[Reservation]:
        return []


async def test_store_replies_that_do_not_match_the_batch_fail_its_callers_never_strand_them() -> (
    None
):
    batcher = ReservationBatcher(_MismatchedJournal())  # type: ignore[arg-type]
    with structlog.testing.capture_logs() as lines, pytest.raises(StoreUnavailable):
        await asyncio.wait_for(batcher.reserve(_ordered("evt_1", key=None)), 5)
    assert [line["event"] for line in lines] == ["reserve_crashed"]


async def _shuffled_run(seed: int) -> list[str]:
    """One seeded run of deliveries through a receiver's batcher: ordered or not,
    batched or written alone (an inline commit), sharing event keys, some cancelled,
    some writes failing, each write taking a random number of loop turns. What broke
    the turns' promises, if anything."""
    rnd = random.Random(seed)
    broken: list[str] = []
    ordered_ids: list[str] = []
    writing = 0

    async def write_ordered(ids: list[str]) -> None:
        nonlocal writing
        if writing:
            broken.append(f"two ordered writes at once: {ids}")
        writing += 1
        ordered_ids.extend(ids)
        try:
            for _ in range(rnd.randint(0, 6)):
                await asyncio.sleep(0)
            if rnd.random() < 0.15:
                raise StoreUnavailable("the store's commit failed")
        finally:
            writing -= 1

    class Journal:
        journal = None

        async def reserve_deliveries(self, items: list[NewDelivery]) -> list[Reservation]:
            ordered = sorted(item.id for item in items if any(j.order_key for j in item.jobs))
            if ordered:
                await write_ordered(ordered)
            else:
                for _ in range(rnd.randint(0, 6)):
                    await asyncio.sleep(0)
            return [Reservation("accepted", item.id, False, item.body_sha256) for item in items]

    store = Journal()
    store.journal = store  # type: ignore[assignment]
    batcher = ReservationBatcher(
        store,  # type: ignore[arg-type]
        max_batch=rnd.choice([1, 2, 3, 256]),
        max_in_flight=rnd.choice([1, 2, 4]),
    )
    callers: list[asyncio.Task[object]] = []
    for n in range(40):
        ordered = rnd.random() < 0.6
        item = _ordered(f"evt_{rnd.randint(0, 3)}", key="key" if ordered else None, body=b"%d" % n)
        if ordered and rnd.random() < 0.4:

            async def alone(ids: list[str] = [item.id]) -> object:  # noqa: B006
                await write_ordered(ids)
                return ids

            callers.append(asyncio.create_task(batcher.reserve_in_turn(item, alone)))
        else:
            callers.append(asyncio.create_task(batcher.reserve(item)))
        for _ in range(rnd.randint(0, 3)):
            await asyncio.sleep(0)
        if rnd.random() < 0.2:
            rnd.choice(callers).cancel()
    _, waiting = await asyncio.wait(callers, timeout=5)
    if waiting:
        broken.append(f"{len(waiting)} callers never answered")
        for caller in waiting:
            caller.cancel()
    await asyncio.gather(*callers, return_exceptions=True)
    if ordered_ids != sorted(ordered_ids):
        broken.append(f"ordered writes out of id order: {ordered_ids}")
    return broken


async def test_ordered_writes_never_overlap_go_in_id_order_and_leave_no_caller_waiting() -> None:
    for seed in range(200):
        assert await _shuffled_run(seed) == [], f"seed {seed}"
