"""Working: retries with backoff, dead letters, effects once. Both stores."""

from __future__ import annotations

import asyncio
import itertools

import httpx

from tests.conftest import make_config, running_inbox, wait_for
from tests.support import handlers
from tests.support.signing import delivery


async def test_a_failing_handler_is_retried_with_backoff_then_dead_lettered(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = make_config(
        db_url,
        routes=[
            {"events": ["*"], "action": "crm", "handler": "tests.support.handlers:always_fails"}
        ],
        worker={"max_attempts": 3, "backoff_base_seconds": 0.3, "backoff_max_seconds": 5},
    )
    body, headers = delivery("evt_fails")
    async with running_inbox(config) as inbox:
        answer = await client.post(inbox.url(), content=body, headers=headers)
        assert answer.json()["status"] == "accepted"

        async def failed() -> bool:
            found = await inbox.store.get_delivery("evt_fails")
            return found is not None and found.status == "failed"

        await wait_for(failed, 20, "the job to be dead-lettered")
        found = await inbox.store.get_delivery("evt_fails")
        assert found is not None
        (job,) = found.jobs
        assert (job.state, job.attempts, job.last_error) == ("failed", 3, "crm_unavailable")
        attempts = await inbox.store.list_attempts(job.id)
        await asyncio.sleep(1.0)  # no fourth attempt comes
        assert handlers.CALLS["evt_fails"] == 3
    assert [a.outcome for a in attempts] == ["retry", "retry", "failed"]
    assert all(a.error_code == "crm_unavailable" for a in attempts)
    times = handlers.TIMES["evt_fails"]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    # Backoff: at least half of base * 2^(n-1) (jitter is over the upper half).
    assert gaps[0] >= 0.15
    assert gaps[1] >= 0.3


async def test_a_failed_job_is_never_marked_completed_and_keeps_its_payload(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = make_config(
        db_url,
        routes=[
            {"events": ["*"], "action": "crm", "handler": "tests.support.handlers:always_fails"}
        ],
        worker={"max_attempts": 1},
    )
    body, headers = delivery("evt_once")
    async with running_inbox(config) as inbox:
        await client.post(inbox.url(), content=body, headers=headers)

        async def failed() -> bool:
            found = await inbox.store.get_delivery("evt_once")
            return found is not None and found.status == "failed"

        await wait_for(failed, 10, "the job to fail")
        found = await inbox.store.get_delivery("evt_once")
    assert found is not None
    assert found.payload_retained
    assert found.jobs[0].state == "failed"
    assert found.jobs[0].business_id is None


async def test_a_sync_handler_uses_the_ledger_and_its_result_becomes_the_business_id(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = make_config(
        db_url,
        routes=[
            {"events": ["*"], "action": "sync", "handler": "tests.support.handlers:count_sync"}
        ],
    )
    body, headers = delivery("evt_sync")
    async with running_inbox(config) as inbox:
        await client.post(inbox.url(), content=body, headers=headers)

        async def done() -> bool:
            found = await inbox.store.get_delivery("evt_sync")
            return found is not None and found.status == "completed"

        await wait_for(done, 10, "the job to complete")
        found = await inbox.store.get_delivery("evt_sync")
        effect = await inbox.store.get_effect("sync:evt_sync")
    assert found is not None and effect is not None
    assert found.jobs[0].business_id == "sync-sync:evt_sync"
    assert effect.state == "recorded"
