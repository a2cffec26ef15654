"""A worker wider than one claim batch claims in lanes, on both stores: its lanes' claims
are in the store at the same time, none takes more than ``claim_batch`` jobs, every slot
fills and no more, and every job runs once."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from hookinbox.app import build_worker_pool
from hookinbox.store import open_store_for
from hookinbox.work.actions import Event
from hookinbox.work.effects import JobContext
from hookinbox.work.lanes import IdleLanes, lane_widths
from tests.store.test_contract import new_delivery
from tests.support.inbox import make_config
from tests.support.journal import every_first_job_completed
from tests.support.waiting import wait_for

CONCURRENCY = 6
CLAIM_BATCH = 2


class _FillsEverySlot:
    """Each job waits until every slot of the pool runs a job at once (the first time),
    so the test sees whether the lanes together fill the pool; counts runs per event."""

    def __init__(self) -> None:
        self.running = 0
        self.most_at_once = 0
        self.runs: Counter[str] = Counter()
        self.all_slots_filled = asyncio.Event()

    async def run(self, event: Event, ctx: JobContext) -> str | None:
        self.runs[event.event_id] += 1
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        if self.running == CONCURRENCY:
            self.all_slots_filled.set()
        try:
            # Bounded: a pool that never fills its slots fails the assertion below, late.
            await asyncio.wait_for(self.all_slots_filled.wait(), 10)
        finally:
            self.running -= 1
        return None


@pytest.mark.parametrize(
    ("concurrency", "claim_batch", "widths"),
    [(4, 32, [4]), (128, 32, [32, 32, 32, 32]), (40, 32, [20, 20]), (7, 2, [2, 2, 2, 1])],
)
def test_a_pools_slots_are_cut_into_even_lanes_no_wider_than_a_claim_batch(
    concurrency: int, claim_batch: int, widths: list[int]
) -> None:
    assert lane_widths(concurrency, claim_batch) == widths


async def test_a_pool_wider_than_a_claim_batch_claims_in_lanes_that_overlap(db_url: str) -> None:
    store = open_store_for(db_url)
    await store.open()
    limits: list[int] = []
    in_flight = 0
    most_in_flight = 0
    for name in ("claim_due_jobs", "settle_and_claim"):
        real = getattr(store.queue, name)

        async def watched(*args: Any, _real: Any = real, **kw: Any) -> Any:
            nonlocal in_flight, most_in_flight
            # (worker, limit, lease): the limit after the settlements of a settle batch.
            limits.append(args[-2])
            in_flight += 1
            most_in_flight = max(most_in_flight, in_flight)
            try:
                return await _real(*args, **kw)
            finally:
                in_flight -= 1

        setattr(store.queue, name, watched)
    handler = _FillsEverySlot()
    try:
        items = [replace(new_delivery(f"e{i}"), source="test") for i in range(24)]
        await store.journal.reserve_deliveries(items)
        config = make_config(
            db_url, worker={"concurrency": CONCURRENCY, "claim_batch": CLAIM_BATCH}
        )
        pool = build_worker_pool(config, store, actions={("test", "a"): handler}, name="w")
        stop = asyncio.Event()
        running = asyncio.create_task(pool.run(stop))
        try:
            await wait_for(
                lambda: every_first_job_completed(store, items), 30, "every job completed"
            )
        finally:
            stop.set()
            await running
        assert handler.all_slots_filled.is_set()
        assert handler.most_at_once == CONCURRENCY
        assert handler.runs == Counter({item.event_id: 1 for item in items})
        assert limits and max(limits) <= CLAIM_BATCH
        assert most_in_flight >= 2
    finally:
        await store.close()


async def test_a_signal_of_new_jobs_wakes_the_first_idle_lane_alone() -> None:
    """A receiver's commit of a few jobs is claimed by one lane, not by every idle lane
    at once; a signal while no lane waits is owed to the next lane that goes idle."""
    lanes = IdleLanes()
    stop = asyncio.Event()
    waiting = {n: asyncio.create_task(lanes.wait(n, stop, timeout=60)) for n in (2, 0, 1)}
    await asyncio.sleep(0)  # all three are waiting
    lanes.wake_one()
    await asyncio.wait_for(waiting[0], 10)
    assert not waiting[1].done() and not waiting[2].done()
    lanes.wake_one()
    await asyncio.wait_for(waiting[1], 10)
    assert not waiting[2].done()
    stop.set()
    await asyncio.wait_for(waiting[2], 10)

    lanes.wake_one()  # no lane waits: owed
    # Returns at once (a lane that waited would be stopped only by the 60 s timeout).
    await asyncio.wait_for(lanes.wait(3, asyncio.Event(), timeout=60), 10)
