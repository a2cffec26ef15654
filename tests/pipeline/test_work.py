"""Working: retries with backoff, dead letters, effects once. Both stores."""

from __future__ import annotations

import asyncio
import itertools

import httpx

from tests.support import handlers
from tests.support.inbox import make_config, running_inbox
from tests.support.signing import delivery
from tests.support.waiting import wait_for, wait_for_status


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

        await wait_for_status(inbox.store, "evt_fails", "failed", 20)
        found = await inbox.store.journal.get_delivery("evt_fails")
        assert found is not None
        (job,) = found.jobs
        assert (job.state, job.attempts, job.last_error) == ("failed", 3, "crm_unavailable")
        attempts = await inbox.store.queue.list_attempts(job.id)
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

        await wait_for_status(inbox.store, "evt_once", "failed", 10)
        found = await inbox.store.journal.get_delivery("evt_once")
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

        await wait_for_status(inbox.store, "evt_sync", "completed", 10)
        found = await inbox.store.journal.get_delivery("evt_sync")
        effect = await inbox.store.effects.get_effect("sync:evt_sync")
    assert found is not None and effect is not None
    assert found.jobs[0].business_id == "sync-sync:evt_sync"
    assert effect.state == "recorded"


async def test_two_jobs_sharing_a_business_key_make_the_effect_once(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = make_config(
        db_url,
        routes=[
            {"events": ["*"], "action": "analyze", "handler": "tests.support.handlers:analyze_call"}
        ],
    )
    async with running_inbox(config) as inbox:
        answers = await asyncio.gather(
            *(
                client.post(inbox.url(), content=body, headers=headers)
                for body, headers in (
                    delivery("evt_call_a", "call.ended", call_id="c-1"),
                    delivery("evt_call_b", "call.transcribed", call_id="c-1"),
                )
            )
        )
        assert [a.json()["status"] for a in answers] == ["accepted", "accepted"]

        async def both_settled() -> bool:
            # A job settles after its handler returns (the settle batch's own commit).
            if not {"evt_call_a", "evt_call_b"} <= handlers.FINISHED:
                return False
            views = [
                await inbox.store.journal.get_delivery(e) for e in ("evt_call_a", "evt_call_b")
            ]
            return all(v is not None and v.jobs[0].state != "processing" for v in views)

        await wait_for(both_settled, 20, "both jobs to finish and settle")
        views = [await inbox.store.journal.get_delivery(e) for e in ("evt_call_a", "evt_call_b")]
        jobs = [v.jobs[0] for v in views if v is not None]
        waited = max(jobs, key=lambda job: job.attempts)
        history = await inbox.store.queue.list_attempts(waited.id)
    assert handlers.CALLS["analysis:call-analysis:c-1:v2"] == 1
    assert [job.state for job in jobs] == ["completed", "completed"]
    assert {job.business_id for job in jobs} == {"analysis-c-1"}
    # The job that found the key held by a live job waited without spending attempts
    # (max_attempts is 3 here), then found the effect recorded.
    assert [a.outcome for a in history][-1] == "completed"
    assert {a.outcome for a in history[:-1]} == {"deferred"}
    assert {a.error_code for a in history[:-1]} == {"effect_in_progress"}
    assert waited.max_attempts == 3 + len(history) - 1


async def test_a_hung_handler_is_abandoned_at_the_job_timeout_and_dead_lettered(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = make_config(
        db_url,
        routes=[{"events": ["*"], "action": "hang", "handler": "tests.support.handlers:hangs"}],
        worker={"max_attempts": 2, "job_timeout_seconds": 0.5},
    )
    body, headers = delivery("evt_hangs")
    async with running_inbox(config) as inbox:
        await client.post(inbox.url(), content=body, headers=headers)

        await wait_for_status(inbox.store, "evt_hangs", "failed", 15)
        found = await inbox.store.journal.get_delivery("evt_hangs")
    assert found is not None
    assert (found.jobs[0].attempts, found.jobs[0].last_error) == (2, "job_timeout")
    assert handlers.CALLS["evt_hangs"] == 2


async def test_an_effect_result_that_is_not_json_is_still_recorded_so_it_is_made_once(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = make_config(
        db_url,
        routes=[
            {"events": ["*"], "action": "odd", "handler": "tests.support.handlers:returns_no_json"}
        ],
    )
    body, headers = delivery("evt_odd")
    async with running_inbox(config) as inbox:
        await client.post(inbox.url(), content=body, headers=headers)

        await wait_for_status(inbox.store, "evt_odd", "completed", 10)
        effect = await inbox.store.effects.get_effect("odd:evt_odd")
    assert effect is not None
    assert (effect.state, effect.result) == ("recorded", {"unrecorded": "not_json"})
    assert handlers.CALLS["made:odd:evt_odd"] == 1
