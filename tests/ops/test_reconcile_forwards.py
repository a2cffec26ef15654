"""Issue 12, item 2: a forward whose POST never reached its target (the connection was
refused) leaves no "started" row in the effects ledger, so ``reconcile`` does not report
a dead-lettered forward as "effect started and never recorded"; one that did reach the
target (it answered 503) still is. Both stores."""

from __future__ import annotations

import asyncio

import httpx

from hookinbox import ops
from hookinbox.app import standard_operator_views
from hookinbox.config import Config
from hookinbox.ids import forward_effect_key
from hookinbox.store import Store
from tests.support.inbox import make_config, running_inbox
from tests.support.processes import free_port
from tests.support.signing import delivery
from tests.support.target import RecordingTarget
from tests.support.waiting import wait_for_status

VIEWS = standard_operator_views()


def forward_config(db_url: str, url: str) -> Config:
    return make_config(
        db_url,
        routes=[{"events": ["*"], "action": "relay", "forward": url, "forward_timeout_seconds": 5}],
        worker={"max_attempts": 2, "backoff_base_seconds": 0.1},
        operations={"accepted_too_old": 0.05},
    )


async def unrecorded(config: Config, store: Store) -> int:
    await asyncio.sleep(0.1)  # older than operations.accepted_too_old
    report = await ops.reconcile(store, config, checks=VIEWS.checks)
    (finding,) = [f for f in report.findings if f.check == "unrecorded_effects"]
    return finding.count


async def test_a_forward_that_never_connected_is_not_an_unrecorded_effect(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = forward_config(db_url, f"http://127.0.0.1:{free_port()}/gone")
    body, headers = delivery("evt_never_connected")
    async with running_inbox(config) as inbox:
        await client.post(inbox.url(), content=body, headers=headers)
        await wait_for_status(inbox.store, "evt_never_connected", "failed")
        found = await inbox.store.journal.get_delivery("evt_never_connected")
        assert found is not None
        job = found.jobs[0]
        assert (job.attempts, job.last_error) == (2, "connect_error")
        assert await inbox.store.effects.get_effect(forward_effect_key(job.id)) is None
        assert await unrecorded(config, inbox.store) == 0


async def test_a_forward_the_target_answered_503_stays_started_and_is_reported(
    db_url: str, client: httpx.AsyncClient
) -> None:
    body, headers = delivery("evt_reached")
    with RecordingTarget(statuses=[503, 503]) as target:
        config = forward_config(db_url, target.url)
        async with running_inbox(config) as inbox:
            await client.post(inbox.url(), content=body, headers=headers)
            await wait_for_status(inbox.store, "evt_reached", "failed")
            found = await inbox.store.journal.get_delivery("evt_reached")
            assert found is not None
            key = forward_effect_key(found.jobs[0].id)
            started = await inbox.store.effects.get_effect(key)
            assert started is not None and started.state == "started"
            assert await unrecorded(config, inbox.store) == 1
    assert len(target.requests) == 2
