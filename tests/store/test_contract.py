"""The store contract, on both stores, without importing a concrete backend."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from hookinbox.ids import job_id, new_delivery_id
from hookinbox.store import NewDelivery, NewJob, Store, open_store_for


def new_delivery(
    event_id: str, *, body: bytes = b"{}", actions: tuple[str, ...] = ("a",)
) -> NewDelivery:
    delivery_id = new_delivery_id()
    return NewDelivery(
        id=delivery_id,
        source="s",
        event_id=event_id,
        event_type="t",
        body_sha256=hashlib.sha256(body).hexdigest(),
        body=body,
        headers={"content-type": "application/json"},
        jobs=tuple(NewJob(job_id(delivery_id, a), a) for a in actions),
        max_attempts=3,
    )


async def test_a_batch_is_answered_in_order_with_accepted_and_duplicates(store: Store) -> None:
    first = await store.journal.reserve_deliveries([new_delivery("e1")])
    assert first[0].outcome == "accepted"
    batch = [new_delivery("e2"), new_delivery("e1"), new_delivery("e3", body=b'{"x":1}')]
    answers = await store.journal.reserve_deliveries(batch)
    assert [a.outcome for a in answers] == ["accepted", "duplicate", "accepted"]
    assert answers[1].delivery_id == first[0].delivery_id
    assert answers[0].delivery_id == batch[0].id
    counts = await store.count_rows()
    assert (counts["deliveries"], counts["jobs"], counts["payloads"]) == (3, 3, 3)


async def test_a_duplicate_with_another_body_is_a_conflict_with_both_hashes(store: Store) -> None:
    original = new_delivery("e1", body=b'{"a":1}')
    await store.journal.reserve_deliveries([original])
    (answer,) = await store.journal.reserve_deliveries([new_delivery("e1", body=b'{"a":2}')])
    assert answer.conflict
    assert answer.first_body_sha256 == original.body_sha256
    found = await store.journal.get_delivery("e1")
    assert found is not None
    assert (found.delivery_count, found.conflicts) == (2, 1)


async def test_two_stores_reserving_the_same_event_at_once_accept_it_once(db_url: str) -> None:
    stores = [open_store_for(db_url) for _ in range(4)]
    for s in stores:
        await s.open()
    try:
        answers = await asyncio.gather(
            *(
                s.journal.reserve_deliveries([new_delivery("race")])
                for s in stores
                for _ in range(5)
            )
        )
        outcomes = [a[0].outcome for a in answers]
        assert outcomes.count("accepted") == 1
        assert len({a[0].delivery_id for a in answers}) == 1
        counts = await stores[0].count_rows()
        assert (counts["deliveries"], counts["jobs"]) == (1, 1)
    finally:
        for s in stores:
            await s.close()


async def test_claims_are_exclusive_and_bounded(db_url: str) -> None:
    stores = [open_store_for(db_url) for _ in range(3)]
    for s in stores:
        await s.open()
    try:
        await stores[0].journal.reserve_deliveries([new_delivery(f"e{i}") for i in range(20)])
        claims = await asyncio.gather(
            *(s.queue.claim_due_jobs(f"w{n}", 5, 30) for n, s in enumerate(stores))
        )
        claimed = [job.id for jobs in claims for job in jobs]
        assert all(len(jobs) <= 5 for jobs in claims)
        assert len(claimed) == len(set(claimed)) == 15
        rest = await stores[0].queue.claim_due_jobs("w9", 100, 30)
        assert len(rest) == 5
        assert not set(j.id for j in rest) & set(claimed)
        assert await stores[0].queue.claim_due_jobs("w9", 100, 30) == []
    finally:
        for s in stores:
            await s.close()


async def test_an_expired_lease_is_claimed_again_and_the_old_token_is_refused(store: Store) -> None:
    await store.journal.reserve_deliveries([new_delivery("e1")])
    (job,) = await store.queue.claim_due_jobs("w1", 10, 1)
    assert job.attempts == 1 and job.body == b"{}"
    assert await store.queue.claim_due_jobs("w2", 10, 1) == []
    await asyncio.sleep(1.2)
    (again,) = await store.queue.claim_due_jobs("w2", 10, 30)
    assert (again.id, again.attempts) == (job.id, 2)
    assert not await store.queue.complete_job(job.id, job.lease_token, None)  # the lost lease
    assert await store.queue.complete_job(again.id, again.lease_token, "biz-1")
    found = await store.journal.get_delivery("e1")
    assert found is not None and found.status == "completed"
    assert found.jobs[0].business_id == "biz-1"
    attempts = await store.queue.list_attempts(job.id)
    assert [(a.worker, a.outcome) for a in attempts] == [
        ("w1", "lease_expired"),
        ("w2", "completed"),
    ]


async def test_a_retry_is_due_later_by_the_database_clock(store: Store) -> None:
    await store.journal.reserve_deliveries([new_delivery("e1")])
    (job,) = await store.queue.claim_due_jobs("w", 1, 30)
    assert await store.queue.retry_job(job.id, job.lease_token, "boom", 0.6)
    assert await store.queue.claim_due_jobs("w", 1, 30) == []
    found = await store.journal.get_delivery("e1")
    assert found is not None
    assert (found.status, found.jobs[0].last_error) == ("accepted", "boom")
    await asyncio.sleep(0.8)
    (second,) = await store.queue.claim_due_jobs("w", 1, 30)
    assert second.attempts == 2


async def test_a_lease_expiring_on_the_last_attempt_is_a_dead_letter(store: Store) -> None:
    await store.journal.reserve_deliveries([new_delivery("e1")])
    for _ in range(3):
        (job,) = await store.queue.claim_due_jobs("w", 1, 1)
        if job.attempts < 3:
            await store.queue.retry_job(job.id, job.lease_token, "boom", 0)
    await asyncio.sleep(1.2)
    assert await store.queue.claim_due_jobs("w", 1, 30) == []  # no attempts left
    assert await store.queue.fail_exhausted_leases() == 1
    found = await store.journal.get_delivery("e1")
    assert found is not None
    assert (found.status, found.jobs[0].last_error) == ("failed", "lease_expired")


async def test_the_first_recorded_effect_wins(store: Store) -> None:
    first = await store.effects.start_effect("k", "job-1")
    assert (first.record.state, first.created, first.held_by_live_job) == ("started", True, False)
    second = await store.effects.start_effect("k", "job-2")
    assert (second.record.job_id, second.created) == ("job-1", False)
    assert not second.held_by_live_job  # no job job-1 holds a lease
    recorded = await store.effects.record_effect("k", {"id": "x-1"})
    assert (recorded.state, recorded.result) == ("recorded", {"id": "x-1"})
    again = await store.effects.record_effect("k", {"id": "x-2"})
    assert again.result == {"id": "x-1"}
    assert await store.effects.get_effect("missing") is None


async def test_lists_are_newest_first_paginated_by_key_and_filtered(store: Store) -> None:
    for i in range(7):
        await store.journal.reserve_deliveries([new_delivery(f"e{i}")])
    page = await store.journal.list_deliveries(limit=3)
    assert [d.event_id for d in page] == ["e6", "e5", "e4"]
    nxt = await store.journal.list_deliveries(limit=3, before=page[-1].id)
    assert [d.event_id for d in nxt] == ["e3", "e2", "e1"]
    (job,) = await store.queue.claim_due_jobs("w", 1, 30)
    await store.queue.fail_job(job.id, job.lease_token, "bad")
    failed = await store.journal.list_deliveries(status="failed")
    assert [d.event_id for d in failed] == ["e0"]
    assert [d.status for d in failed] == ["failed"]
    assert await store.journal.list_deliveries(source="other") == []


@pytest.mark.parametrize("ref", ["by_id", "by_event_id"])
async def test_a_delivery_is_found_by_internal_or_event_id(store: Store, ref: str) -> None:
    item = new_delivery("evt_find")
    await store.journal.reserve_deliveries([item])
    found = await store.journal.get_delivery(item.id if ref == "by_id" else "evt_find")
    assert found is not None and found.id == item.id
    assert found.body_sha256 == item.body_sha256
    assert await store.journal.get_delivery("evt_find", source="other") is None


async def test_migrations_are_idempotent(store: Store) -> None:
    assert await store.migrate() == []
