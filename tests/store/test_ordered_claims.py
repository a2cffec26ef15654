"""The claim of ordered jobs, on both stores, below the worker: a job waits behind the
unfinished jobs of its key with smaller ids (whenever they were committed), only once it
is older than the grace, and concurrent claims never take two jobs of one key; the
store's clock read against this host's, which makes the ids the claims compare."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from hookinbox.ids import job_id, new_delivery_id
from hookinbox.store import NewJob, Store, core, open_store_for
from tests.support.journal import keyed_delivery


async def test_an_earlier_reservation_committed_later_still_runs_first(store: Store) -> None:
    earlier, later = new_delivery_id(), new_delivery_id()
    await store.journal.reserve_deliveries([keyed_delivery("e2", "k", delivery_id=later)])
    await store.journal.reserve_deliveries([keyed_delivery("e1", "k", delivery_id=earlier)])
    (job,) = await store.queue.claim_due_jobs("w", 10, 30)
    assert job.delivery_id == earlier
    assert await store.queue.claim_due_jobs("w", 10, 30) == []
    assert await store.queue.complete_job(job.id, job.lease_token, None)
    (second,) = await store.queue.claim_due_jobs("w", 10, 30)
    assert second.delivery_id == later


async def test_an_ordered_job_is_claimed_only_once_its_grace_has_passed(store: Store) -> None:
    plain = keyed_delivery("plain", "-")
    plain = replace(plain, jobs=(NewJob(job_id(plain.id, "a"), "a"),))
    await store.journal.reserve_deliveries([keyed_delivery("e1", "k"), plain])
    # Only the keyed job waits for the grace: the unordered one goes at once.
    (first,) = await store.queue.claim_due_jobs("w", 10, 30, order_grace=60)
    assert first.event_id == "plain"
    (second,) = await store.queue.claim_due_jobs("w", 10, 30, order_grace=0)
    assert second.event_id == "e1"


async def test_concurrent_claims_never_take_two_jobs_of_one_key(db_url: str) -> None:
    stores = [open_store_for(db_url) for _ in range(3)]
    for s in stores:
        await s.open()
    try:
        await stores[0].journal.reserve_deliveries(
            [keyed_delivery(f"e{k}_{n}", f"k{k}") for n in range(6) for k in range(4)]
        )
        for _ in range(6):
            claims = await asyncio.gather(
                *(s.queue.claim_due_jobs(f"w{n}", 3, 30) for n, s in enumerate(stores))
            )
            claimed = [job for jobs in claims for job in jobs]
            # One job per key at a time, the oldest of each.
            assert len(claimed) == 4
            assert len({job.event_id.split("_")[0] for job in claimed}) == 4
            assert all(job.attempts == 1 for job in claimed)
            for job in claimed:
                assert await stores[0].queue.complete_job(job.id, job.lease_token, None)
        assert await stores[0].queue.claim_due_jobs("w", 10, 30) == []
    finally:
        for s in stores:
            await s.close()


async def test_the_store_clock_is_read_against_this_hosts(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store and the tests run on one host: the clocks agree to well under a second.
    offset, uncertainty = await store.clock_offset()
    assert abs(offset) < 0.5 and 0 <= uncertainty < 0.5, (offset, uncertainty)
    # A host whose clock is 30 s behind sees the store 30 s ahead.
    monkeypatch.setattr(core, "host_clock", lambda: time.time() - 30)
    offset, _ = await store.clock_offset()
    assert 29.5 < offset < 30.5, offset
