"""The seed's negative scenarios for a tracked video task, on both stores: one transition,
one outbox row and one notification per terminal resource, whatever the provider does."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import httpx
import pytest
import structlog

from hookinbox.config import config_from_mapping
from hookinbox.store import Store
from tests.resources.support import NotifyService, outbox_settings, video_event, video_route
from tests.support.inbox import make_config, running_inbox
from tests.support.signing import SECRET_ENV, WRONG_SECRET
from tests.support.waiting import wait_for


def _config(db_url: str, notify: NotifyService, **route: Any) -> Any:
    return make_config(db_url, routes=[video_route(**route)], outbox=outbox_settings(notify.url))


async def _job_of(store: Store, event_id: str) -> Any:
    found = await store.journal.get_delivery(event_id)
    assert found is not None
    (job,) = found.jobs
    return job


async def _settled(store: Store, event_id: str) -> bool:
    found = await store.journal.get_delivery(event_id)
    return found is not None and found.status in ("completed", "failed")


async def test_the_same_delivery_twice_at_once_gives_one_transition_and_one_notification(
    db_url: str, client: httpx.AsyncClient
) -> None:
    with NotifyService() as notify:
        async with running_inbox(_config(db_url, notify)) as inbox:
            task = await inbox.inbox.resources.create(
                "video", tenant="acme", owner="user-1", provider_ref="prov-1"
            )
            body, headers = video_event("evt_ready", "ready", "prov-1")
            answers = await asyncio.gather(
                *(client.post(inbox.url(), content=body, headers=headers) for _ in range(2))
            )
            assert sorted(a.json()["status"] for a in answers) == ["accepted", "duplicate"]
            await wait_for(lambda: _settled(inbox.store, "evt_ready"), 10, "the job")

            async def sent() -> bool:
                row = await inbox.store.outbox.get_outbox(f"video-ready:{task.id}")
                return row is not None and row.state == "sent"

            await wait_for(sent, 10, "the notification")
            await asyncio.sleep(0.3)  # nothing more comes
            resource = await inbox.store.resources.get_resource(task.id)
            log = await inbox.inbox.resources.transitions(task.id)
            outbox = await inbox.store.outbox.list_outbox()
    assert resource is not None and (resource.state, resource.version) == ("ready", 2)
    assert [(t.outcome, t.to_state) for t in log if t.outcome == "applied"] == [
        ("applied", "ready")
    ]
    assert [row.key for row in outbox] == [f"video-ready:{task.id}"]
    assert notify.keys() == {f"video-ready:{task.id}": 1}
    body_sent = notify.requests[0]["body"]
    assert body_sent["state"] == "ready" and body_sent["owner"] == "user-1"
    assert "at" not in body_sent and "data" not in body_sent  # ids and states, no payload


async def test_a_bad_signature_is_refused_and_touches_nothing(
    db_url: str, client: httpx.AsyncClient
) -> None:
    with NotifyService() as notify:
        async with running_inbox(_config(db_url, notify)) as inbox:
            task = await inbox.inbox.resources.create(
                "video", tenant="acme", owner="user-1", provider_ref="prov-1"
            )
            body, headers = video_event("evt_forged", "ready", "prov-1", secret=WRONG_SECRET)
            answer = await client.post(inbox.url(), content=body, headers=headers)
            assert (answer.status_code, answer.json()) == (400, {"error": "invalid_signature"})
            await asyncio.sleep(0.3)
            resource = await inbox.store.resources.get_resource(task.id)
            counts = await inbox.store.count_rows()
            outbox = await inbox.store.outbox.list_outbox()
    assert resource is not None and resource.state == "submitted"
    assert counts["deliveries"] == 0 and outbox == [] and notify.requests == []


async def test_an_event_pointing_at_another_tenants_task_is_rejected_without_leaking_it(
    db_url: str, client: httpx.AsyncClient
) -> None:
    with NotifyService() as notify:
        async with running_inbox(_config(db_url, notify)) as inbox:
            theirs = await inbox.inbox.resources.create(
                "video", tenant="globex", owner="user-9", provider_ref="prov-theirs"
            )
            body, headers = video_event("evt_cross", "ready", "prov-theirs", tenant="acme")
            owner_body, owner_headers = video_event(
                "evt_owner", "ready", "prov-theirs", tenant="globex", owner="user-1"
            )
            with structlog.testing.capture_logs() as logs:
                answer = await client.post(inbox.url(), content=body, headers=headers)
                assert answer.json()["status"] == "accepted"
                await wait_for(lambda: _settled(inbox.store, "evt_cross"), 10, "the job")
                await client.post(inbox.url(), content=owner_body, headers=owner_headers)
                await wait_for(lambda: _settled(inbox.store, "evt_owner"), 10, "the job")
            job = await _job_of(inbox.store, "evt_cross")
            owner_job = await _job_of(inbox.store, "evt_owner")
            resource = await inbox.store.resources.get_resource(theirs.id)
            log = await inbox.inbox.resources.transitions(theirs.id)
            counts = await inbox.store.resources.transition_counts()
            outbox = await inbox.store.outbox.list_outbox()
    assert answer.text.find(theirs.id) == -1
    assert (job.state, job.last_error, job.business_id) == ("completed", "tenant_mismatch", None)
    assert (owner_job.state, owner_job.last_error) == ("completed", "owner_mismatch")
    assert resource is not None and (resource.state, resource.version) == ("submitted", 1)
    assert [(t.outcome, t.reason) for t in log[1:]] == [
        ("rejected", "tenant_mismatch"),
        ("rejected", "owner_mismatch"),
    ]
    assert counts == {"rejected:tenant_mismatch": 1, "rejected:owner_mismatch": 1}
    assert outbox == [] and notify.requests == []
    assert not any(theirs.id in repr(line) or "globex" in repr(line) for line in logs)
    assert {line["outcome"] for line in logs if line["event"] == "resource_event"} == {
        "tenant_mismatch",
        "owner_mismatch",
    }


async def test_a_late_processing_after_ready_is_rejected_and_recorded(
    db_url: str, client: httpx.AsyncClient
) -> None:
    with NotifyService() as notify:
        async with running_inbox(_config(db_url, notify)) as inbox:
            task = await inbox.inbox.resources.create(
                "video", tenant="acme", owner="user-1", provider_ref="prov-1"
            )
            for event_id, status in [("evt_p", "processing"), ("evt_r", "ready")]:
                body, headers = video_event(event_id, status, "prov-1")
                await client.post(inbox.url(), content=body, headers=headers)
                await wait_for(lambda e=event_id: _settled(inbox.store, e), 10, "the job")
            body, headers = video_event("evt_late", "processing", "prov-1")
            await client.post(inbox.url(), content=body, headers=headers)
            await wait_for(lambda: _settled(inbox.store, "evt_late"), 10, "the late job")
            late = await _job_of(inbox.store, "evt_late")
            attempts = await inbox.store.queue.list_attempts(late.id)
            resource = await inbox.store.resources.get_resource(task.id)
            log = await inbox.inbox.resources.transitions(task.id)
            await wait_for(lambda: _notified(notify, 1), 10, "the notification")
    assert resource is not None and resource.state == "ready"
    assert (late.state, late.last_error, late.attempts) == ("completed", "rejected_transition", 1)
    assert [a.outcome for a in attempts] == ["completed"]  # never retried
    assert [(t.from_state, t.to_state, t.outcome, t.reason) for t in log[1:]] == [
        ("submitted", "processing", "applied", None),
        ("processing", "ready", "applied", None),
        ("ready", "processing", "rejected", "from_terminal"),
    ]
    assert log[-1].delivery_id == late.id.split(":")[0]
    assert log[-1].event_time == "2024-01-01T00:00:00Z"  # kept for audit only
    assert notify.keys() == {f"video-ready:{task.id}": 1}


async def _notified(notify: NotifyService, count: int) -> bool:
    return len(notify.handled) >= count


async def test_ready_before_processing_ends_ready_with_one_notification(
    db_url: str, client: httpx.AsyncClient
) -> None:
    with NotifyService() as notify:
        async with running_inbox(_config(db_url, notify)) as inbox:
            task = await inbox.inbox.resources.create(
                "video", tenant="acme", owner="user-1", provider_ref="prov-1"
            )
            for event_id, status in [("evt_r", "ready"), ("evt_p", "processing")]:
                body, headers = video_event(event_id, status, "prov-1")
                await client.post(inbox.url(), content=body, headers=headers)
                await wait_for(lambda e=event_id: _settled(inbox.store, e), 10, "the job")
            await wait_for(lambda: _notified(notify, 1), 10, "the notification")
            resource = await inbox.store.resources.get_resource(task.id)
            log = await inbox.inbox.resources.transitions(task.id)
    assert resource is not None and resource.state == "ready"
    assert [(t.to_state, t.outcome, t.reason) for t in log[1:]] == [
        ("ready", "applied", None),
        ("processing", "rejected", "from_terminal"),
    ]
    assert notify.keys() == {f"video-ready:{task.id}": 1}


async def test_an_early_event_is_parked_then_applied_when_the_reference_arrives(
    db_url: str, client: httpx.AsyncClient
) -> None:
    with NotifyService() as notify:
        config = _config(db_url, notify, park_recheck_seconds=5, park_recheck_max_seconds=5)
        async with running_inbox(config) as inbox:
            task = await inbox.inbox.resources.create("video", tenant="acme", owner="user-1")
            decoy = await inbox.inbox.resources.create(
                "video", tenant="acme", owner="user-1", provider_ref="prov-other"
            )
            body, headers = video_event("evt_early", "ready", "prov-late")
            await client.post(inbox.url(), content=body, headers=headers)

            async def parked() -> bool:
                job = await _job_of(inbox.store, "evt_early")
                return bool(job.last_error == "parked")

            await wait_for(parked, 10, "the event to be parked")
            job = await _job_of(inbox.store, "evt_early")
            assert job.state == "accepted"
            # Attaching the reference wakes the parked event at once (not after 5 s).
            await inbox.inbox.resources.attach_ref(task.id, "prov-late")
            await wait_for(lambda: _settled(inbox.store, "evt_early"), 3, "the parked event")
            job = await _job_of(inbox.store, "evt_early")
            resource = await inbox.store.resources.get_resource(task.id)
            other = await inbox.store.resources.get_resource(decoy.id)
            attempts = await inbox.store.queue.list_attempts(job.id)
            await wait_for(lambda: _notified(notify, 1), 10, "the notification")
    assert (job.state, job.business_id) == ("completed", task.id)
    assert [a.outcome for a in attempts] == ["parked", "completed"]
    assert job.max_attempts == 4  # a re-check does not spend the retry budget (3)
    assert resource is not None and resource.state == "ready"
    assert other is not None and other.state == "submitted"  # never attached elsewhere
    assert notify.keys() == {f"video-ready:{task.id}": 1}


async def test_a_parked_event_goes_to_the_dead_letters_at_its_deadline(
    db_url: str, client: httpx.AsyncClient
) -> None:
    with NotifyService() as notify:
        config = _config(
            # Parked for 2 s, re-checked every 0.2 s: room for the re-checks before the
            # deadline however slow the machine's claims are.
            db_url,
            notify,
            park_seconds=2,
            park_recheck_seconds=0.2,
            park_recheck_max_seconds=0.2,
        )
        async with running_inbox(config) as inbox:
            body, headers = video_event("evt_orphan", "ready", "prov-nobody")
            await client.post(inbox.url(), content=body, headers=headers)
            await wait_for(lambda: _settled(inbox.store, "evt_orphan"), 10, "the deadline")
            job = await _job_of(inbox.store, "evt_orphan")
            findings = await inbox.inbox.resources.findings()
    assert (job.state, job.last_error) == ("failed", "unknown_resource")
    assert job.attempts >= 3  # re-checked with backoff before giving up
    assert findings == []


TENANT_B_SECRET = "whsec_" + base64.b64encode(b"tenant-b-signing-secret-01234567").decode()
API_READ_TOKEN = "reader-token-0123456789abcdef-0123456789"


def _two_tenants_config(db_url: str, notify: NotifyService, **route: Any) -> Any:
    """Source ``acme`` (the default test secret) and source ``tenant-b`` (its own secret),
    each with the same video route: a provider account per tenant."""
    sources = {
        "acme": {"scheme": "standard-webhooks", "secret_env": SECRET_ENV,
                 "routes": [video_route(**route)]},
        "tenant-b": {"scheme": "standard-webhooks", "secret_env": "HB_TENANT_B_SECRET",
                     "routes": [video_route(**route)]},
    }  # fmt: skip
    base = _config(db_url, notify).model_dump(mode="json", exclude_none=True)
    return config_from_mapping({**base, "sources": sources})


@pytest.mark.parametrize("inline", [False, True], ids=["worker", "inline"])
async def test_another_tenants_source_cannot_move_a_resource(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, inline: bool
) -> None:
    """An attacker holding tenant B's signing secret names tenant acme's task and claims
    to be acme: the task stays where acme's own provider put it, and the refusal lands
    in the sender's review list, not acme's. Applied by a worker or in the receiver's
    own commit (``inline``), the same."""
    monkeypatch.setenv("HB_TENANT_B_SECRET", TENANT_B_SECRET)
    monkeypatch.setenv("HOOKINBOX_API_TOKENS", f"ci:read:{API_READ_TOKEN}")
    with NotifyService() as notify:
        async with running_inbox(_two_tenants_config(db_url, notify, inline=inline)) as inbox:
            task = await inbox.inbox.resources.create(
                "video", tenant="acme", owner="user-1", provider_ref="task-acme-1"
            )
            body, headers = video_event("evt_acme_queued", "queued", "task-acme-1")
            await client.post(inbox.url("acme"), content=body, headers=headers)
            await wait_for(lambda: _settled(inbox.store, "evt_acme_queued"), 10, "acme's event")
            body, headers = video_event(
                "evt_b_forged", "processing", "task-acme-1", tenant="acme", secret=TENANT_B_SECRET
            )
            with structlog.testing.capture_logs() as logs:
                answer = await client.post(inbox.url("tenant-b"), content=body, headers=headers)
                assert answer.json()["status"] == "accepted"  # B's secret is valid for B
                await wait_for(lambda: _settled(inbox.store, "evt_b_forged"), 10, "the event")
            scraped = (await client.get(f"{inbox.base_url}/metrics")).text
            job = await _job_of(inbox.store, "evt_b_forged")
            resource = await inbox.store.resources.get_resource(task.id)
            api = f"{inbox.base_url}/api/v1/reviews"
            auth = {"authorization": f"Bearer {API_READ_TOKEN}"}
            victims = (await client.get(api, params={"tenant": "acme"}, headers=auth)).json()
            senders = (await client.get(api, params={"source": "tenant-b"}, headers=auth)).json()
    assert resource is not None and resource.state == "queued", "B's source moved acme's task"
    assert (job.state, job.last_error, job.business_id) == ("completed", "source_mismatch", None)
    assert resource.sources == ("acme",)  # bound by the first event applied to it
    assert answer.text.find(task.id) == -1
    assert not any(task.id in repr(line) for line in logs)
    assert [line["outcome"] for line in logs if line["event"] == "resource_event"] == [
        "source_mismatch"
    ]
    assert 'hookinbox_resource_events_total{kind="video",outcome="source_mismatch"} 1.0' in scraped
    assert victims["reviews"] == []
    (review,) = senders["reviews"]
    assert (review["source"], review["reason"], review["tenant"]) == (
        "tenant-b",
        "source_mismatch",
        None,  # B's route pins no tenant; what it claimed (acme) is not B's
    )
    assert review["resource_id"] is None and review["from"] is None  # nothing of acme's task
    assert review["delivery_id"] == job.id.split(":")[0] and review["to"] == "processing"


async def test_a_tenant_mismatch_is_reviewed_as_the_senders_not_the_owners(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tenant B's source names acme's task but says it is B's: refused, and the review
    line carries B's source and tenant; acme's list never shows it."""
    monkeypatch.setenv("HB_TENANT_B_SECRET", TENANT_B_SECRET)
    monkeypatch.setenv("HOOKINBOX_API_TOKENS", f"ci:read:{API_READ_TOKEN}")
    with NotifyService() as notify:
        async with running_inbox(_two_tenants_config(db_url, notify)) as inbox:
            task = await inbox.inbox.resources.create(
                "video", tenant="acme", owner="user-1", provider_ref="task-acme-1"
            )
            body, headers = video_event(
                "evt_b_claims_b", "ready", "task-acme-1", tenant="tenant-b", secret=TENANT_B_SECRET
            )
            await client.post(inbox.url("tenant-b"), content=body, headers=headers)
            await wait_for(lambda: _settled(inbox.store, "evt_b_claims_b"), 10, "the event")
            job = await _job_of(inbox.store, "evt_b_claims_b")
            resource = await inbox.store.resources.get_resource(task.id)
            api = f"{inbox.base_url}/api/v1/reviews"
            auth = {"authorization": f"Bearer {API_READ_TOKEN}"}
            (review,) = (await client.get(api, headers=auth)).json()["reviews"]
            victims = (await client.get(api, params={"tenant": "acme"}, headers=auth)).json()
    assert review["tenant"] == "tenant-b", "the refusal landed in the owner's review list"
    assert resource is not None and (resource.state, resource.sources) == ("submitted", ())
    assert job.last_error == "tenant_mismatch"
    assert (review["source"], review["resource_id"], review["from"]) == ("tenant-b", None, None)
    assert victims["reviews"] == []
