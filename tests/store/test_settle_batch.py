"""Settling and renewing many jobs at once (the worker's batches), on both stores: one
call, yet every lease checked on its own."""

from __future__ import annotations

import asyncio

from hookinbox.store import AttemptDetail, Settlement, Store
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
