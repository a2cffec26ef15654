"""The one dead-letter listing (``store.queue.list_dead_letters``), each filter and order, on
both stores: the CLI's list (newest failure first), a bulk retry (oldest failure first)
and the admin's pages (newest job first) are all this query."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from hookinbox.store import DeadLetterCriteria, DeadLetterOrder, JobDetail, Store
from tests.store.test_contract import new_delivery


async def _dead_letters(store: Store) -> dict[str, str]:
    """Four failed jobs whose failure order differs from their id order, plus a completed
    and a waiting one; returns ``{name: job id}``."""
    first = new_delivery("e1", actions=("x", "y"))
    second = new_delivery("e2", actions=("x",))
    third = new_delivery("e3", actions=("x", "z"))
    for item in (first, second, third):
        await store.journal.reserve_deliveries([item])
    ids = {
        "1x": first.jobs[0].id,
        "1y": first.jobs[1].id,
        "2x": second.jobs[0].id,
        "3x": third.jobs[0].id,
        "3z": third.jobs[1].id,
    }
    claimed = {job.id: job for job in await store.queue.claim_due_jobs("w", 10, 30)}
    for name, reason in (("3x", "boom"), ("1x", "boom"), ("2x", "gone"), ("1y", "gone")):
        job = claimed[ids[name]]
        assert await store.queue.fail_job(job.id, job.lease_token, reason)
        await asyncio.sleep(0.01)  # distinct failure times on both clocks
    done = claimed[ids["3z"]]
    assert await store.queue.complete_job(done.id, done.lease_token, None)
    await store.journal.reserve_deliveries([new_delivery("e4")])  # accepted, not failed
    return ids


def _names(ids: dict[str, str], jobs: list[JobDetail]) -> list[str]:
    back = {job_id: name for name, job_id in ids.items()}
    return [back[job.id] for job in jobs]


async def test_each_order_and_its_keyset_pages(store: Store) -> None:
    ids = await _dead_letters(store)
    expected: dict[DeadLetterOrder, list[str]] = {
        "newest_job": ["3x", "2x", "1y", "1x"],
        "newest_failure": ["1y", "2x", "1x", "3x"],
        "oldest_failure": ["3x", "1x", "2x", "1y"],
    }
    assert _names(ids, await store.queue.list_dead_letters()) == expected["newest_job"]
    for order, names in expected.items():
        listed = await store.queue.list_dead_letters(order=order)
        assert _names(ids, listed) == names, order
        pages: list[JobDetail] = []
        before = None
        while page := await store.queue.list_dead_letters(order=order, before=before, limit=3):
            pages += page
            before = page[-1].job_id
        assert _names(ids, pages) == names, order


@pytest.mark.parametrize(
    ("filters", "names"),
    [
        ({"source": "s"}, ["3x", "2x", "1y", "1x"]),
        ({"source": "other"}, []),
        ({"action": "y"}, ["1y"]),
        ({"reason": "gone"}, ["2x", "1y"]),
        ({"reason": "boom", "action": "x"}, ["3x", "1x"]),
        ({"limit": 2}, ["3x", "2x"]),
    ],
)
async def test_each_filter(store: Store, filters: dict[str, object], names: list[str]) -> None:
    ids = await _dead_letters(store)
    limit = filters.get("limit", 50)
    wanted = {key: value for key, value in filters.items() if key != "limit"}
    criteria = DeadLetterCriteria(**wanted)  # type: ignore[arg-type]
    listed = await store.queue.list_dead_letters(criteria, limit=limit)  # type: ignore[arg-type]
    assert _names(ids, listed) == names


async def test_since_keeps_those_failed_at_or_after_it(store: Store) -> None:
    ids = await _dead_letters(store)
    everything = await store.queue.list_dead_letters(order="oldest_failure")
    failed_at = everything[1].failed_at  # "1x"
    assert failed_at is not None and failed_at.tzinfo is not None
    # A millisecond early: SQLite keeps times as REAL seconds, a float round trip away.
    since = failed_at - timedelta(milliseconds=1)
    recent = await store.queue.list_dead_letters(
        DeadLetterCriteria(since=since), order="oldest_failure"
    )
    assert _names(ids, recent) == ["1x", "2x", "1y"]
    detail = recent[0]
    assert (detail.state, detail.last_error, detail.attempts) == ("failed", "boom", 1)
    assert detail.first_failed_at is not None and detail.payload_retained
