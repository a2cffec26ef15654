"""The worker's settle batcher on both stores: the endings of one loop turn settle
together, and one value the store refuses fails only its own job."""

from __future__ import annotations

import asyncio

from hookinbox.errors import HookinboxError
from hookinbox.store import AttemptDetail, Settlement, Store
from hookinbox.work.settling import SettleBatcher
from tests.store.test_contract import new_delivery


async def test_a_business_id_the_store_refuses_fails_only_its_own_job(store: Store) -> None:
    await store.journal.reserve_deliveries([new_delivery(f"e{i}") for i in range(3)])
    good, other, bad = await store.queue.claim_due_jobs("w", 3, 30)
    batcher = SettleBatcher(store)
    answers = await asyncio.gather(
        batcher.settle(Settlement(good.id, good.lease_token, "completed", business_id="b-1")),
        batcher.settle(Settlement(other.id, other.lease_token, "retry", "http_503", 30)),
        # A lone surrogate: neither SQLite nor a JSON parameter can carry it.
        batcher.settle(Settlement(bad.id, bad.lease_token, "completed", business_id="x\ud800")),
        return_exceptions=True,
    )
    assert answers[:2] == [True, True]
    assert isinstance(answers[2], HookinboxError)
    states = [await store.queue.get_job(job.id) for job in (good, other, bad)]
    assert [s.state if s else None for s in states] == ["completed", "accepted", "processing"]


async def test_a_lost_lease_in_a_batch_is_answered_false_for_that_job_alone(store: Store) -> None:
    await store.journal.reserve_deliveries([new_delivery(f"e{i}") for i in range(2)])
    mine, stolen = await store.queue.claim_due_jobs("w", 2, 30)
    batcher = SettleBatcher(store)
    answers = await asyncio.gather(
        batcher.settle(Settlement(mine.id, mine.lease_token, "failed", "boom")),
        batcher.settle(Settlement(stolen.id, "another-token", "completed")),
    )
    assert answers == [True, False]


async def test_settlements_of_a_refused_batch_keep_their_detail_when_they_go_again_alone(
    store: Store,
) -> None:
    await store.journal.reserve_deliveries([new_delivery(f"e{i}") for i in range(2)])
    good, bad = await store.queue.claim_due_jobs("w", 2, 30)
    batcher = SettleBatcher(store)
    detail = AttemptDetail("example.test/hook", 503, "busy", 25)
    answers = await asyncio.gather(
        batcher.settle(
            Settlement(good.id, good.lease_token, "retry", "http_503", 30, detail=detail)
        ),
        batcher.settle(Settlement(bad.id, bad.lease_token, "completed", business_id="x\ud800")),
        return_exceptions=True,
    )
    assert answers[0] is True and isinstance(answers[1], HookinboxError)
    (attempt,) = await store.queue.list_attempts(good.id)
    assert (attempt.outcome, attempt.target, attempt.http_status) == (
        "retry",
        "example.test/hook",
        503,
    )
    assert (attempt.response_snippet, attempt.duration_ms) == ("busy", 25)
    assert attempt.next_attempt_at is not None
