"""The worker's settle batcher on both stores: the endings of one loop turn settle
together, and one value the store refuses fails only its own job."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from typing import Any

from hookinbox.app import build_worker_pool
from hookinbox.errors import HookinboxError
from hookinbox.store import AttemptDetail, NewDelivery, Settlement, Store, open_store_for
from hookinbox.work.actions import Event
from hookinbox.work.effects import JobContext
from hookinbox.work.settling import SettleBatcher
from hookinbox.work.timeouts import JobTimeouts
from tests.store.test_contract import new_delivery
from tests.support.inbox import make_config
from tests.support.journal import every_first_job_completed
from tests.support.waiting import wait_for


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


class _Noop:
    async def run(self, event: Event, ctx: JobContext) -> str | None:
        return None


async def test_a_worker_claims_the_slots_a_settle_batch_frees_in_the_same_call(
    db_url: str,
) -> None:
    """While the pool runs, the endings of a loop turn settle together with the claim of
    the slots they freed: one call per turn, not a settle and a claim."""
    store = open_store_for(db_url)
    await store.open()
    calls: Counter[str] = Counter()
    for name in ("claim_due_jobs", "settle_jobs", "settle_and_claim"):
        real = getattr(store.queue, name)

        async def counted(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            calls[_name] += 1
            answer = await _real(*args, **kw)
            if _name == "claim_due_jobs" and answer:
                # An empty queue is polled every poll interval until the test sees the
                # end, as often as a loaded machine makes that take: only claims that
                # took jobs say how the pool claims.
                calls["claim_due_jobs_taking_jobs"] += 1
            return answer

        setattr(store.queue, name, counted)
    try:
        items = [replace(new_delivery(f"e{i}"), source="test") for i in range(40)]
        await store.journal.reserve_deliveries(items)
        config = make_config(db_url, worker={"concurrency": 4})
        pool = build_worker_pool(config, store, actions={("test", "a"): _Noop()}, name="w")
        stop = asyncio.Event()
        running = asyncio.create_task(pool.run(stop))
        try:
            await wait_for(
                lambda: every_first_job_completed(store, items), 20, "every job completed"
            )
        finally:
            stop.set()
            await running
        assert calls["settle_and_claim"] >= 40 // 4 - 1
        # The first claim, and those after a turn found the queue short (its end).
        assert calls["claim_due_jobs_taking_jobs"] <= 3
    finally:
        await store.close()


class _Sleeps:
    """Sleeps as long as the event id says (``sleep-0.05``)."""

    async def run(self, event: Event, ctx: JobContext) -> str | None:
        await asyncio.sleep(float(event.event_id.split("-")[1]))
        return None


async def test_each_hung_job_times_out_at_its_own_deadline_and_no_other(db_url: str) -> None:
    """The pool's jobs share one timer for their timeouts: a job that outlives its time is
    cancelled and dead-lettered as a timeout; the others, started before or after it,
    complete."""
    store = open_store_for(db_url)
    await store.open()
    try:
        sleeps = ["0", "5", "0.05", "5", "0"]
        items = [
            replace(new_delivery(f"sleep-{s}-{n}"), source="test", max_attempts=1)
            for n, s in enumerate(sleeps)
        ]
        # A timeout far above the quick jobs' 0.05 s (a loaded machine stalls the loop)
        # and far below the hung ones' 5 s.
        config = make_config(db_url, worker={"concurrency": 2, "job_timeout_seconds": 1.0})
        pool = build_worker_pool(config, store, actions={("test", "a"): _Sleeps()}, name="w")
        stop = asyncio.Event()
        started = asyncio.get_running_loop().time()
        running = asyncio.create_task(pool.run(stop))
        try:
            for item in items:  # one at a time: each job starts at its own time
                await store.journal.reserve_deliveries([item])
                await asyncio.sleep(0.1)
            await wait_for(lambda: _all_ended(store, items), 10, "every job ended")
        finally:
            stop.set()
            await running
        assert asyncio.get_running_loop().time() - started < 4.5  # no hung job ran its 5 s
        ended = [await store.queue.get_job(item.jobs[0].id) for item in items]
        assert [(job.state, job.last_error) if job else None for job in ended] == [
            ("completed", None),
            ("failed", "job_timeout"),
            ("completed", None),
            ("failed", "job_timeout"),
            ("completed", None),
        ]
    finally:
        await store.close()


async def _all_ended(store: Store, items: list[NewDelivery]) -> bool:
    for item in items:
        job = await store.queue.get_job(item.jobs[0].id)
        if job is None or job.state not in ("completed", "failed"):
            return False
    return True


def test_job_timeouts_still_run_out_when_the_pool_moves_to_another_event_loop() -> None:
    """``hookinbox.testing`` may drive one pool from successive event loops: a timer left
    on a closed loop must not leave the next loop's jobs without a timeout."""
    timeouts = JobTimeouts(0.05)

    async def quick() -> str:
        timeouts.done(timeouts.watch())  # its timer stays set, on this loop
        return "quick"

    async def hangs() -> str:
        task = timeouts.watch()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            if timeouts.done(task):
                return "timed out"
            raise
        finally:
            timeouts.done(task)
        return "slept"

    assert asyncio.run(quick()) == "quick"
    assert asyncio.run(hangs()) == "timed out"
