"""Bulk retry by filter over both stores: the preview says exactly how many match and
which the limit takes, the retry takes those (oldest failure first), refuses when the
selection moved since the preview, is bounded, and audits each job as a single retry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hookinbox import ops
from hookinbox.errors import InvalidArgument, OperationRefused
from hookinbox.store import DeadLetterCriteria, Store
from tests.support.inbox import make_config
from tests.support.journal import add_delivery, settle_all

ACTOR = "test:bulk"


async def _dead(
    store: Store, n: int, *, source: str = "test", error: str = "http_503"
) -> list[str]:
    for i in range(n):
        await add_delivery(store, f"evt_{source}_{error}_{i}", source=source)
    return await settle_all(store, "failed", error=error)


async def test_a_preview_names_the_count_and_the_selection_and_the_retry_takes_exactly_those(
    store: Store, db_url: str
) -> None:
    config = make_config(db_url)
    connect = await _dead(store, 5, error="connect_error")
    await _dead(store, 2, error="http_503")
    await _dead(store, 3, source="other", error="connect_error")
    wanted = ops.DeadLetterFilter(source="test", reason="connect_error", since=ops.parse_when("1h"))

    preview = await ops.dlq_retry_all(
        store, config, limit=3, matching=wanted, actor=ACTOR, dry_run=True
    )
    assert preview.matched == 5 and preview.as_json()["selected"] == 3
    assert [i.job_id for i in preview.items] == connect[:3]  # oldest failure first
    assert {i.outcome for i in preview.items} == {"would_requeue"}
    assert await store.audit.list_operator_actions() == []

    done = await ops.dlq_retry_all(store, config, limit=3, matching=wanted, expect=3, actor=ACTOR)
    assert done.requeued == 3 and [i.job_id for i in done.items] == connect[:3]
    for job_id in connect[:3]:
        job = await store.queue.get_job(job_id)
        assert job is not None and (job.state, job.trigger) == ("accepted", "dlq-retry")
    audit = await store.audit.list_operator_actions()
    assert sorted(a.job_id for a in audit) == sorted(connect[:3])  # type: ignore[type-var]
    assert {(a.command, a.actor) for a in audit} == {("dlq-retry", ACTOR)}

    # What is left: 2 of this filter; the other source and reason untouched.
    rest = await ops.dlq_retry_all(
        store, config, limit=10, matching=wanted, actor=ACTOR, dry_run=True
    )
    assert rest.matched == 2 and [i.job_id for i in rest.items] == connect[3:]
    assert await store.queue.count_dead_letters(DeadLetterCriteria(source="other")) == 3
    assert await store.queue.count_dead_letters(DeadLetterCriteria(reason="http_503")) == 2


async def test_a_confirmation_refuses_when_the_selection_changed_since_the_preview(
    store: Store, db_url: str
) -> None:
    config = make_config(db_url)
    await _dead(store, 2)
    preview = await ops.dlq_retry_all(store, config, limit=10, actor=ACTOR, dry_run=True)
    assert len(preview.items) == 2
    await _dead(store, 1, error="late")
    with pytest.raises(OperationRefused, match="3 dead letters now, 2 previewed"):
        await ops.dlq_retry_all(store, config, limit=10, expect=2, actor=ACTOR)
    assert await store.queue.count_dead_letters() == 3  # nothing retried


async def test_a_time_range_and_the_bounds(store: Store, db_url: str) -> None:
    config = make_config(db_url)
    await _dead(store, 2)
    later = datetime.now(UTC) + timedelta(hours=1)
    past = ops.DeadLetterFilter(until=datetime.now(UTC) - timedelta(hours=1))
    assert (await ops.dlq_retry_all(store, config, limit=5, matching=past, actor=ACTOR)).items == []
    upcoming = ops.DeadLetterFilter(since=later)
    assert (
        await ops.dlq_retry_all(store, config, limit=5, matching=upcoming, actor=ACTOR)
    ).matched == 0
    with pytest.raises(InvalidArgument, match="since must be before until"):
        await ops.dlq_retry_all(
            store,
            config,
            limit=5,
            matching=ops.DeadLetterFilter(since=later, until=later),
            actor=ACTOR,
        )
    with pytest.raises(InvalidArgument, match="between 1 and 100"):
        await ops.dlq_retry_all(store, config, limit=101, actor=ACTOR, max_limit=100)
    assert await store.queue.count_dead_letters() == 2
