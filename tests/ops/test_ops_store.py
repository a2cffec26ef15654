"""The operator functions over both stores, in process: the contract the CLI and the admin
page rely on. The real command line is tested in tests/cli/test_ops_cli.py."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3

import asyncpg
import pytest

from hookinbox import ops
from hookinbox.app import standard_operator_views
from hookinbox.errors import (
    ConfigError,
    InvalidArgument,
    NotFound,
    OperationRefused,
    PayloadPurged,
    UnknownSource,
)
from hookinbox.store import Store
from tests.support.inbox import make_config
from tests.support.journal import add_delivery, settle_all
from tests.support.waiting import wait_for

ACTOR = "test:ops"
RESOURCE_CHECKS = {
    "terminal_without_delivery",
    "transition_without_outbox",
    "unbound_resources",
    "outbox_unsent",
    "parked_past_deadline",
}

VIEWS = standard_operator_views()


async def test_empty_store_reports_nothing(store: Store, db_url: str) -> None:
    config = make_config(db_url)
    assert (await ops.dlq_list(store, config)).jobs == []
    assert (await ops.dlq_retry_all(store, config, limit=10, actor=ACTOR)).items == []
    report = await ops.reconcile(store, config, checks=VIEWS.checks)
    assert report.clean and report.total == 0
    assert {f.check for f in report.findings} >= {
        "expired_leases",
        "stale_accepted",
        "failed_past_review",
        "deliveries_without_jobs",
        "unrecorded_effects",
        "unreviewed_transitions",
        "held_keys",
    }
    purged = await ops.purge(store, config)
    assert [s.deleted for s in purged.steps] == [0, 0, 0]
    with pytest.raises(NotFound):
        await ops.trace(store, config, "evt_missing", layers=VIEWS.trace_layers)
    with pytest.raises(NotFound):
        await ops.replay(store, config, "dlv_missing", actor=ACTOR)
    with pytest.raises(NotFound):
        await ops.dlq_retry(store, config, "dlv_x:count", actor=ACTOR)


async def test_dead_letters_listed_retried_once_and_audited(store: Store, db_url: str) -> None:
    config = make_config(db_url)
    for n in range(3):
        await add_delivery(store, f"evt_{n}")
    failed = await settle_all(store, "failed")
    listed = await ops.dlq_list(store, config)
    assert {job.id for job in listed.jobs} == set(failed)
    first = listed.jobs[0]
    data = listed.as_json()["dead_letters"][0]
    assert data["last_error"] == "crm_unavailable" and data["review_deadline"]
    assert first.first_failed_at is not None and first.attempts == 1

    dry = await ops.dlq_retry_all(store, config, limit=2, actor=ACTOR, dry_run=True)
    assert [i.outcome for i in dry.items] == ["would_requeue"] * 2
    assert len((await ops.dlq_list(store, config)).jobs) == 3

    one = await ops.dlq_retry(store, config, failed[0], actor=ACTOR)
    assert one.requeued == 1
    job = await store.queue.get_job(failed[0])
    # Its attempt is kept (numbers count on) and the route's three are granted beyond it.
    assert job is not None and job.state == "accepted"
    assert (job.attempts, job.max_attempts) == (1, 1 + config.attempts_for("test", "count"))
    assert job.trigger == "dlq-retry"
    with pytest.raises(OperationRefused, match="accepted, not failed"):
        await ops.dlq_retry(store, config, failed[0], actor=ACTOR)

    bulk = await ops.dlq_retry_all(store, config, limit=1, actor=ACTOR)
    assert bulk.requeued == 1
    assert len((await ops.dlq_list(store, config)).jobs) == 1
    with pytest.raises(InvalidArgument):
        await ops.dlq_retry_all(store, config, limit=0, actor=ACTOR)

    claimed = await store.queue.claim_due_jobs("w", 10, 30)
    assert {c.trigger for c in claimed} == {"dlq-retry"} and len(claimed) == 2
    actions = await store.audit.list_operator_actions()
    assert [(a.command, a.actor) for a in actions] == [("dlq-retry", ACTOR)] * 2


async def test_a_purge_keeps_dead_letter_payloads_so_they_can_be_retried(
    store: Store, db_url: str
) -> None:
    config = make_config(db_url)
    await add_delivery(store, "evt_p")
    (job_id,) = await settle_all(store, "failed")
    await ops.purge(store, config, payloads_only=True, older_than=0)
    assert (await store.queue.get_job(job_id)).payload_retained  # type: ignore[union-attr]
    assert (await ops.dlq_retry(store, config, job_id, actor=ACTOR)).requeued == 1
    job = await store.queue.get_job(job_id)
    assert job is not None and (job.state, job.attempts) == ("accepted", 1)


async def _lose_payload(db_url: str, delivery_id: str) -> None:
    """A dead letter without its payload, as a row emptied by hand or by an older
    version's purge would be: the store offers no way to do it, on purpose."""
    sql = "DELETE FROM payloads WHERE delivery_id = "
    if db_url.startswith("sqlite"):
        with contextlib.closing(sqlite3.connect(db_url.removeprefix("sqlite:///"))) as conn:
            conn.execute(sql + "?", (delivery_id,))
            conn.commit()
        return
    conn = await asyncpg.connect(db_url)  # ?search_path= selects the test's schema
    try:
        assert await conn.execute(sql + "$1", delivery_id) == "DELETE 1"
    finally:
        await conn.close()


async def test_dlq_retry_refuses_a_dead_letter_whose_payload_is_gone(
    store: Store, db_url: str
) -> None:
    config = make_config(db_url)
    delivery_id = await add_delivery(store, "evt_p")
    (job_id,) = await settle_all(store, "failed")
    await _lose_payload(db_url, delivery_id)

    with pytest.raises(PayloadPurged, match=f"job {job_id}: its payload was purged") as refused:
        await ops.dlq_retry(store, config, job_id, actor=ACTOR)
    assert refused.value.code == "payload_purged" and refused.value.exit_code == 5
    with pytest.raises(PayloadPurged):
        await ops.dlq_retry(store, config, job_id, actor=ACTOR, dry_run=True)
    bulk = await ops.dlq_retry_all(store, config, limit=10, actor=ACTOR)
    assert [(i.outcome, (i.reason or "").split(":")[0]) for i in bulk.items] == [
        ("refused", "payload_purged")
    ]
    job = await store.queue.get_job(job_id)
    assert job is not None and (job.state, job.attempts) == ("failed", 1)
    assert await store.audit.list_operator_actions() == []


async def test_purge_payloads_then_keys_never_dead_letters(store: Store, db_url: str) -> None:
    config = make_config(db_url)
    done = [await add_delivery(store, f"evt_done_{n}") for n in range(5)]
    await settle_all(store, "completed")
    await add_delivery(store, "evt_failed")
    await settle_all(store, "failed")
    await add_delivery(store, "evt_waiting")

    with pytest.raises(OperationRefused, match="redelivery window"):
        await ops.purge(store, config, older_than=3600)
    dry = await ops.purge(store, config, payloads_only=True, older_than=0, dry_run=True)
    assert dry.steps[0].candidates == 5 and dry.steps[0].deleted == 0

    seen: list[tuple[str, int, int]] = []
    report = await ops.purge(
        store,
        config,
        payloads_only=True,
        older_than=0,
        batch=2,
        progress=lambda kind, d, t: seen.append((kind, d, t)),
    )
    (step,) = report.steps
    assert (step.deleted, step.batches) == (5, 3)
    assert seen[-1] == ("payloads", 5, 5)
    rows = await store.count_rows()
    assert rows["payloads"] == 2 and rows["deliveries"] == 7
    view = await store.journal.get_delivery(done[0])
    assert view is not None and not view.payload_retained
    with pytest.raises(OperationRefused, match="purged"):
        await ops.replay(store, config, done[0], actor=ACTOR)

    # Keys: a zero redelivery window lets the test purge everything old enough.
    config = make_config(db_url, operations={"redelivery_window": 0, "key_retention": 1})
    await asyncio.sleep(1.1)
    report = await ops.purge(store, config, older_than=1, batch=2)
    keys = report.steps[1]
    assert (keys.deleted, keys.held) == (5, 2)
    rows = await store.count_rows()
    assert rows["deliveries"] == 2 and rows["jobs"] == 2
    assert {j.event_id for j in (await ops.dlq_list(store, config)).jobs} == {"evt_failed"}


async def test_pause_resume_and_the_receivers_view(store: Store, db_url: str) -> None:
    config = make_config(db_url)
    paused = ops.PausedSources(store)
    await paused.refresh()
    assert not paused("test")
    with pytest.raises(UnknownSource):
        await ops.pause_source(store, config, "nope", actor=ACTOR)
    state = await ops.pause_source(store, config, "test", actor=ACTOR, reason="contract v2")
    assert state.paused and state.reason == "contract v2" and state.changed_by == ACTOR
    await paused.refresh()
    assert paused("test")
    listed = (await ops.list_sources(store, config)).as_json()["sources"]
    assert listed == [
        {
            "source": "test",
            "configured": True,
            "scheme": "standard-webhooks",
            "routes": ["count"],
            "state": "paused",
            "paused": True,
            "reason": "contract v2",
            "changed_at": listed[0]["changed_at"],
            "changed_by": ACTOR,
        }
    ]
    await ops.resume_source(store, config, "test", actor=ACTOR)
    await paused.refresh()
    assert not paused("test")
    assert [a.command for a in await store.audit.list_operator_actions()] == ["pause", "resume"]


async def test_reconcile_finds_each_kind(store: Store, db_url: str) -> None:
    config = make_config(
        db_url,
        operations={"accepted_too_old": 0.001, "dlq_review_days": 0.00000001},
        routes=[
            {"events": ["crm.*"], "action": "count", "handler": "tests.support.handlers:count"}
        ],
    )
    await add_delivery(store, "evt_accepted")
    await add_delivery(store, "evt_unrouted", actions=())
    await add_delivery(store, "evt_other_type", actions=(), event_type="billing.paid")
    stuck = await add_delivery(store, "evt_stuck")
    await asyncio.sleep(0.05)
    claimed = await store.queue.claim_due_jobs("w", 10, 0.01)
    by_delivery = {c.delivery_id: c for c in claimed}
    await store.effects.start_effect("crm-task:evt_accepted:create", by_delivery[stuck].id)
    for c in claimed:
        if c.delivery_id != stuck:
            await store.queue.fail_job(c.id, c.lease_token, "boom")
    await asyncio.sleep(0.05)
    report = await ops.reconcile(store, config, checks=VIEWS.checks)
    # The pipeline's checks; tracked resources add theirs (tests/resources).
    counts = {f.check: f.count for f in report.findings if f.check not in RESOURCE_CHECKS}
    assert counts == {
        "expired_leases": 1,
        "stale_accepted": 0,
        "failed_past_review": 1,
        "deliveries_without_jobs": 1,
        "unrecorded_effects": 0,
        "unreviewed_transitions": 0,
        "held_keys": 0,
    }
    unrouted = next(f for f in report.findings if f.check == "deliveries_without_jobs")
    assert unrouted.items[0]["detail"] == "crm.lead.created"
    assert not report.clean and report.as_json()["total"] == 3


async def test_background_purge_of_serve_drops_completed_payloads(
    store: Store, db_url: str
) -> None:
    config = make_config(db_url, operations={"purge_interval": 0.1, "payload_retention": 0})
    await add_delivery(store, "evt_done")
    await settle_all(store, "completed")
    await add_delivery(store, "evt_waiting")
    stop = asyncio.Event()
    loop = asyncio.create_task(ops.run_purge_loop(store, config, stop))
    try:

        async def purged() -> bool:
            return (await store.count_rows())["payloads"] == 1

        await wait_for(purged, 5, "the background purge")
    finally:
        stop.set()
        await asyncio.wait_for(loop, 5)
    waiting = await store.journal.get_delivery("evt_waiting")
    assert waiting is not None and waiting.payload_retained
    off = make_config(db_url, operations={"purge_interval": "off"})
    await asyncio.wait_for(ops.run_purge_loop(store, off, asyncio.Event()), 1)


async def test_trace_across_sources_with_a_layer_handed_in(store: Store, db_url: str) -> None:
    config = make_config(db_url)
    await add_delivery(store, "evt_same", source="test")
    await add_delivery(store, "evt_same", source="other")
    await settle_all(store, "completed")

    async def outbox_layer(_: Store, delivery: object) -> list[dict[str, object]]:
        return [{"key": f"video-ready:{getattr(delivery, 'id', '?')}"}]

    layers = {"outbox": outbox_layer}
    both = await ops.trace(store, config, "evt_same", layers=layers)
    one = await ops.trace(store, config, "evt_same", source="other", layers=layers)
    assert [d.delivery.source for d in both.deliveries] == ["test", "other"]
    (traced,) = one.deliveries
    data = traced.as_json()
    assert data["receipts"]["count"] == 1 and data["journal"]["source"] == "other"
    (job,) = data["jobs"]
    assert [(a["trigger"], a["outcome"]) for a in job["attempt_history"]] == [
        ("delivery", "completed")
    ]
    assert data["outbox"] == [{"key": f"video-ready:{traced.delivery.id}"}]
    by_id = await ops.trace(store, config, traced.delivery.id, layers=layers)
    assert by_id.deliveries[0].delivery.id == traced.delivery.id
    with pytest.raises(NotFound):
        await ops.trace(store, config, "evt_same", source="nope", layers=layers)


async def test_reconcile_runs_the_checks_handed_in(store: Store, db_url: str) -> None:
    config = make_config(db_url)

    class Parked:
        name = "parked_past_deadline"
        title = "parked events past their deadline"

        async def run(self, store: Store, config: object, limit: int) -> ops.Finding:
            return ops.Finding(self.name, self.title, 2, [{"id": "prk_1"}, {"id": "prk_2"}][:limit])

    only = await ops.reconcile(store, config, checks=[Parked()], limit=1)
    assert only.total == 2 and len(only.findings[0].items) == 1 and not only.clean
    both = await ops.reconcile(store, config, checks=[*ops.PIPELINE_CHECKS, Parked()])
    assert both.total == 2 and [f.check for f in both.findings][-1] == "parked_past_deadline"


def test_config_refuses_keys_shorter_than_the_redelivery_window() -> None:
    with pytest.raises(ConfigError, match=r"^operations: key_retention must be at least"):
        make_config("sqlite:///x.db", operations={"key_retention": "1h"})
    with pytest.raises(ConfigError, match=r"operations\.payload_retention"):
        make_config("sqlite:///x.db", operations={"payload_retention": "soon"})
    ops_config = make_config("sqlite:///x.db", operations={"purge_interval": "off"}).operations
    assert ops_config.purge_interval == 0 and ops_config.key_retention == 30 * 86400
