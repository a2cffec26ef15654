"""Settling and renewing many jobs at once (the worker's batches), on both stores: one
call, yet every lease checked on its own."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from hookinbox.errors import HookinboxError
from hookinbox.store import AttemptDetail, ClaimedJob, Settlement, Store, open_store_for
from tests.store.test_contract import new_delivery


async def test_one_settle_batch_applies_each_outcome_and_refuses_only_the_lost_lease(
    store: Store,
) -> None:
    await store.journal.reserve_deliveries([new_delivery(f"e{i}") for i in range(5)])
    jobs = await store.queue.claim_due_jobs("w1", 5, 1)
    lost = jobs[4]
    await asyncio.sleep(1.2)  # every lease lapses; another worker takes one job over
    (taken,) = await store.queue.claim_due_jobs("w2", 1, 30)
    assert taken.id == jobs[0].id
    # The first worker's other leases are renewed in one statement (not the lost one).
    held = {job.id: job.lease_token for job in jobs}
    assert await store.queue.renew_leases(held, 30) == {j.id for j in jobs[1:]}
    answers = await store.queue.settle_jobs(
        [
            Settlement(jobs[0].id, jobs[0].lease_token, "completed", business_id="stale"),
            Settlement(jobs[1].id, jobs[1].lease_token, "completed", business_id="biz-1"),
            Settlement(jobs[2].id, jobs[2].lease_token, "retry", "http_503", 60),
            Settlement(jobs[3].id, jobs[3].lease_token, "deferred", "effect_in_progress", 60),
            Settlement(lost.id, "not-the-token", "failed", "boom"),
        ]
    )
    assert answers == [False, True, True, True, False]
    states = {job.id: (await store.queue.get_job(job.id)) for job in jobs}
    assert states[jobs[0].id] is not None and states[jobs[0].id].state == "processing"
    assert states[jobs[0].id].business_id is None  # the stale worker wrote nothing
    assert states[jobs[1].id] is not None
    assert (states[jobs[1].id].state, states[jobs[1].id].business_id) == ("completed", "biz-1")
    retried, deferred = states[jobs[2].id], states[jobs[3].id]
    assert retried is not None and (retried.state, retried.last_error) == ("accepted", "http_503")
    assert deferred is not None and deferred.state == "accepted"
    assert deferred.max_attempts == retried.max_attempts + 1  # the attempt given back
    assert states[lost.id] is not None and states[lost.id].state == "processing"
    outcomes = [(await store.queue.list_attempts(job.id))[-1].outcome for job in jobs[1:4]]
    assert outcomes == ["completed", "retry", "deferred"]
    # The job taken over settles under its new token, and its old attempt was closed.
    assert await store.queue.settle_jobs([Settlement(taken.id, taken.lease_token, "completed")])
    attempts = await store.queue.list_attempts(taken.id)
    assert [(a.worker, a.outcome) for a in attempts] == [
        ("w1", "lease_expired"),
        ("w2", "completed"),
    ]


async def test_a_job_whose_lease_lapsed_on_its_last_attempt_is_not_claimed_again(
    store: Store,
) -> None:
    item = new_delivery("e1")
    await store.journal.reserve_deliveries([item])
    for attempt in range(1, item.max_attempts + 1):
        (job,) = await store.queue.claim_due_jobs("w", 1, 1)
        assert job.attempts == attempt
        await asyncio.sleep(1.1)
    assert await store.queue.claim_due_jobs("w", 1, 30) == []
    assert await store.queue.fail_exhausted_leases() == 1


async def test_a_settle_batch_keeps_each_attempts_detail_and_when_a_waiting_job_is_due(
    store: Store,
) -> None:
    """What one settle keeps of an attempt (issue 12), a batch keeps for each of its jobs."""
    await store.journal.reserve_deliveries([new_delivery(f"e{i}") for i in range(4)])
    done, retried, deferred, dead = await store.queue.claim_due_jobs("w", 4, 30)
    answered = AttemptDetail("example.test/hook", 200, '{"id": "x-1"}', 12)
    busy = AttemptDetail("example.test/hook", 503, "busy", 40)
    held = AttemptDetail("example.test/hook", 429, "slow down", 7)
    gone = AttemptDetail("example.test/hook", 410, None, 3)
    answers = await store.queue.settle_jobs(
        [
            Settlement(done.id, done.lease_token, "completed", business_id="b-1", detail=answered),
            Settlement(retried.id, retried.lease_token, "retry", "http_503", 60, detail=busy),
            Settlement(deferred.id, deferred.lease_token, "deferred", "http_429", 30, detail=held),
            Settlement(dead.id, dead.lease_token, "failed", "gone", detail=gone),
        ]
    )
    assert answers == [True, True, True, True]
    kept = {job.id: (await store.queue.list_attempts(job.id))[-1] for job in (done, retried)}
    kept |= {job.id: (await store.queue.list_attempts(job.id))[-1] for job in (deferred, dead)}
    for job, detail in ((done, answered), (retried, busy), (deferred, held), (dead, gone)):
        attempt = kept[job.id]
        assert (attempt.target, attempt.http_status, attempt.response_snippet) == (
            detail.target,
            detail.http_status,
            detail.snippet,
        )
        assert attempt.duration_ms == detail.duration_ms
    assert kept[done.id].next_attempt_at is None and kept[dead.id].next_attempt_at is None
    for job, delay in ((retried, 60), (deferred, 30)):
        attempt = kept[job.id]
        assert attempt.ended_at is not None and attempt.next_attempt_at is not None
        waited = (attempt.next_attempt_at - attempt.ended_at).total_seconds()
        assert delay - 1 < waited < delay + 1
    assert (kept[deferred.id].outcome, kept[dead.id].outcome) == ("deferred", "failed")


async def test_a_settlement_without_detail_leaves_the_detail_columns_empty(store: Store) -> None:
    await store.journal.reserve_deliveries([new_delivery("e1")])
    (job,) = await store.queue.claim_due_jobs("w", 1, 30)
    assert await store.queue.settle_jobs([Settlement(job.id, job.lease_token, "retry", "x", 5)])
    (attempt,) = await store.queue.list_attempts(job.id)
    assert (attempt.target, attempt.http_status, attempt.response_snippet) == (None, None, None)
    assert attempt.duration_ms is None and attempt.next_attempt_at is not None


async def test_a_settle_with_a_claim_checks_each_lease_and_never_claims_a_job_it_settled(
    store: Store,
) -> None:
    """A worker's loop turn in one call: the batch settles as ``settle_jobs`` does, and
    the claim riding on it takes none of the batch's jobs, even one due again at once or
    one whose lease lapsed."""
    await store.journal.reserve_deliveries([new_delivery(f"e{i}") for i in range(6)])
    done, again, lapsed = await store.queue.claim_due_jobs("w1", 3, 1)
    await asyncio.sleep(1.2)  # every lease lapses; nobody takes one over
    answers, claimed = await store.queue.settle_and_claim(
        [
            Settlement(done.id, done.lease_token, "completed", business_id="b-1"),
            Settlement(again.id, again.lease_token, "retry", "http_503", 0),  # due at once
            Settlement(lapsed.id, "not-the-token", "completed"),
        ],
        "w1",
        10,
        30,
    )
    assert answers == [True, True, False]
    batch = {done.id, again.id, lapsed.id}
    assert len(claimed) == 3 and not {job.id for job in claimed} & batch
    assert all(job.attempts == 1 and job.body == b"{}" for job in claimed)
    # What the claim left is due: the retry and the lapsed lease, taken by the next claim.
    later = await store.queue.claim_due_jobs("w2", 10, 30)
    assert {job.id for job in later} == {again.id, lapsed.id}
    assert {job.id: job.attempts for job in later} == {again.id: 2, lapsed.id: 2}
    assert [a.outcome for a in await store.queue.list_attempts(done.id)] == ["completed"]
    lapsed_attempts = await store.queue.list_attempts(lapsed.id)
    assert [(a.worker, a.outcome) for a in lapsed_attempts] == [
        ("w1", "lease_expired"),
        ("w2", None),  # under way
    ]
    stored = await store.queue.get_job(done.id)
    assert stored is not None and (stored.state, stored.business_id) == ("completed", "b-1")


async def test_a_settle_with_a_claim_refused_by_the_store_claims_nothing(store: Store) -> None:
    """One statement (one transaction): a batch the store refuses claims no job either,
    so the worker's fallback (each settlement alone) leaves nothing leased unseen."""
    await store.journal.reserve_deliveries([new_delivery(f"e{i}") for i in range(3)])
    (job,) = await store.queue.claim_due_jobs("w1", 1, 30)
    refused = Settlement(job.id, job.lease_token, "completed", business_id="x\ud800")
    with pytest.raises(HookinboxError):
        await store.queue.settle_and_claim([refused], "w1", 5, 30)
    assert len(await store.queue.claim_due_jobs("w2", 5, 30)) == 2
    stored = await store.queue.get_job(job.id)
    assert stored is not None and stored.state == "processing"


async def test_two_workers_settling_and_claiming_in_one_call_run_each_job_once(
    db_url: str,
) -> None:
    """Two stores (two pools, two writer threads on SQLite) turn at once, each settling
    what it ran and claiming more in one call: no job is leased twice, every job
    completes once, with one attempt row. Both hold leases before either turns (on
    SQLite a claim waiting on the other writer's lock can otherwise find the queue
    already drained, and the two would never overlap)."""
    stores = [open_store_for(db_url) for _ in range(2)]
    for s in stores:
        await s.open()
    try:
        await stores[0].journal.reserve_deliveries([new_delivery(f"e{i}") for i in range(150)])
        runs: Counter[str] = Counter()
        by_worker: Counter[str] = Counter()

        async def work(store: Store, name: str, jobs: list[ClaimedJob]) -> None:
            while jobs:
                runs.update(job.id for job in jobs)
                by_worker[name] += len(jobs)
                await asyncio.sleep(0)  # the handlers run; the other worker turns meanwhile
                ended = [Settlement(job.id, job.lease_token, "completed") for job in jobs]
                answers, jobs = await store.queue.settle_and_claim(ended, name, 8, 30)
                assert answers == [True] * len(ended)

        first = [
            await store.queue.claim_due_jobs(f"w{i + 1}", 8, 30) for i, store in enumerate(stores)
        ]
        await asyncio.gather(work(stores[0], "w1", first[0]), work(stores[1], "w2", first[1]))
        assert len(runs) == 150 and set(runs.values()) == {1}
        assert by_worker["w1"] >= 8 and by_worker["w2"] >= 8
        for job_id in runs:
            attempts = await stores[0].queue.list_attempts(job_id)
            assert [(a.number, a.outcome) for a in attempts] == [(1, "completed")]
        assert await stores[0].queue.claim_due_jobs("w9", 100, 30) == []
    finally:
        for s in stores:
            await s.close()
