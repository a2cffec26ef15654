"""The operations the CLI has, over the JSON API on both stores: rejected deliveries
(list, retry through the normal path), the outbox (list, show, resend), tracked resources
(list, show, transitions) and purge (dry run, bounded run); each scoped, audited with the
token's name, and refused in JSON when the input is wrong."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from hookinbox.store import Store
from tests.api.test_api import OPERATE, READ, TOKENS, api, bearer
from tests.resources.support import NotifyService, outbox_settings, video_event, video_route
from tests.support.inbox import RunningInbox, make_config, running_inbox
from tests.support.journal import add_delivery, settle_all
from tests.support.signing import SECRET, SECRET_ENV, WRONG_SECRET, delivery
from tests.support.waiting import wait_for

__all__ = ["api"]  # the fixture, shared with test_api.py


@pytest.fixture(autouse=True)
def _tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKINBOX_API_TOKENS", TOKENS)


async def _commands(store: Store) -> list[tuple[str, str]]:
    return [(a.command, a.actor) for a in await store.audit.list_operator_actions()]


@pytest.fixture
async def video_inbox(db_url: str) -> AsyncIterator[tuple[RunningInbox, NotifyService]]:
    with NotifyService() as notify:
        config = make_config(db_url, routes=[video_route()], outbox=outbox_settings(notify.url))
        async with running_inbox(config) as inbox:
            yield inbox, notify


async def test_rejected_deliveries_are_listed_and_retried_through_the_normal_path(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(db_url)
    body, headers = delivery("evt_rotated", secret=WRONG_SECRET)
    async with running_inbox(config, run_workers=False) as inbox, httpx.AsyncClient() as client:
        api_url = f"{inbox.base_url}/api/v1"
        refused = await client.post(inbox.url(), content=body, headers=headers)
        assert refused.status_code == 400
        await inbox.inbox.receiver.rejected.drain()
        listed = (await client.get(f"{api_url}/rejected", headers=bearer(READ))).json()
        (kept,) = listed["rejected"]
        assert (kept["source"], kept["reason"], kept["body_kept"]) == (
            "test",
            "invalid_signature",
            True,
        )
        assert "body" not in kept and listed["next_before"] is None
        assert listed["totals"][0]["rows"] == 1
        one = {"ids": [kept["id"]]}
        forbidden = await client.post(f"{api_url}/rejected/retry", json=one, headers=bearer(READ))
        assert (forbidden.status_code, forbidden.json()) == (403, {"error": "forbidden"})
        for wrong in ({}, {"ids": [kept["id"]], "all": True}, {"source": "test", "ids": ["x"]}):
            answer = await client.post(
                f"{api_url}/rejected/retry", json=wrong, headers=bearer(OPERATE)
            )
            assert (answer.status_code, answer.json()) == (400, {"error": "invalid_argument"})
        unknown = await client.post(
            f"{api_url}/rejected/retry", json={"ids": ["rej_nope"]}, headers=bearer(OPERATE)
        )
        assert (unknown.status_code, unknown.json()) == (404, {"error": "not_found"})
        still = await client.post(f"{api_url}/rejected/retry", json=one, headers=bearer(OPERATE))
        assert still.status_code == 200
        assert still.json()["still_refused"] == 1
        assert still.json()["results"][0]["outcome"] == "invalid_signature"
    # The secret fixed (a restart reads it), then every one not yet accepted.
    monkeypatch.setenv(SECRET_ENV, f"{SECRET} {WRONG_SECRET}")
    async with running_inbox(config, run_workers=False) as inbox, httpx.AsyncClient() as client:
        fixed = await client.post(
            f"{inbox.base_url}/api/v1/rejected/retry",
            json={"all": True, "source": "test", "limit": 10},
            headers=bearer(OPERATE),
        )
        report = fixed.json()
        assert (report["retried"], report["accepted"], report["still_refused"]) == (1, 1, 0)
        (result,) = report["results"]
        assert result["outcome"] == "accepted" and result["delivery_id"]
        found = await inbox.store.journal.get_delivery(result["delivery_id"])
        assert found is not None and found.event_id == "evt_rotated"
        assert await _commands(inbox.store) == [("rejected-retry", "api:oncall")] * 2


async def test_outbox_and_tracked_resources_over_the_api(
    video_inbox: tuple[RunningInbox, NotifyService],
) -> None:
    inbox, notify = video_inbox
    task = await inbox.inbox.resources.create(
        "video", tenant="acme", owner="user-1", provider_ref="prov-1"
    )
    key = f"video-ready:{task.id}"
    async with httpx.AsyncClient() as client:
        api_url = f"{inbox.base_url}/api/v1"
        # The late event comes after "ready" has been applied (a provider's late retry):
        # sent at once, two workers could apply them in either order.
        for event_id, status in (("evt_ready", "ready"), ("evt_late", "processing")):
            body, headers = video_event(event_id, status, "prov-1")
            await client.post(inbox.url(), content=body, headers=headers)

            async def completed(event_id: str = event_id) -> bool:
                found = await inbox.store.journal.get_delivery(event_id)
                return found is not None and found.status == "completed"

            await wait_for(completed, 15, f"{event_id} to complete")

        async def settled() -> bool:
            row = await inbox.store.outbox.get_outbox(key)
            return row is not None and row.state == "sent"

        await wait_for(settled, 15, "the notification")
        rows = (await client.get(f"{api_url}/outbox", headers=bearer(READ))).json()["outbox"]
        assert [(r["key"], r["state"]) for r in rows] == [(key, "sent")]
        assert "body" not in rows[0]
        failed = await client.get(
            f"{api_url}/outbox", params={"state": "failed"}, headers=bearer(READ)
        )
        assert failed.json() == {"outbox": []}
        shown = (await client.get(f"{api_url}/outbox/{key}", headers=bearer(READ))).json()
        assert shown["body"]["resource_id"] == task.id
        assert (await client.get(f"{api_url}/outbox/nope", headers=bearer(READ))).status_code == 404
        no_scope = await client.post(f"{api_url}/outbox/{key}/resend", headers=bearer(READ))
        assert no_scope.status_code == 403
        resent = await client.post(f"{api_url}/outbox/{key}/resend", headers=bearer(OPERATE))
        assert resent.status_code == 200 and resent.json()["key"] == key

        async def twice() -> bool:
            return len(notify.requests) >= 2

        await wait_for(twice, 10, "the notification again")
        assert notify.keys() == {key: 2} and notify.handled == {key: 1}  # the same key

        listed = (await client.get(f"{api_url}/resources", headers=bearer(READ))).json()
        assert [r["resource_id"] for r in listed["resources"]] == [task.id]
        assert listed["next_before"] is None
        one = (await client.get(f"{api_url}/resources/{task.id}", headers=bearer(READ))).json()
        assert (one["state"], one["tenant"]) == ("ready", "acme")
        log = (
            await client.get(f"{api_url}/resources/{task.id}/transitions", headers=bearer(READ))
        ).json()
        assert [t["outcome"] for t in log["transitions"]] == ["created", "applied", "rejected"]
        assert [t["outcome"] for t in one["transitions"]] == ["created", "applied", "rejected"]
        late = log["transitions"][-1]
        assert (late["from"], late["to"]) == ("ready", "processing") and late["reason"]
        for path in ("/resources/res_nope", "/resources/res_nope/transitions"):
            missing = await client.get(api_url + path, headers=bearer(READ))
            assert (missing.status_code, missing.json()) == (404, {"error": "not_found"})
        bad = await client.get(f"{api_url}/outbox", params={"state": "gone"}, headers=bearer(READ))
        assert bad.status_code == 400
    assert await _commands(inbox.store) == [("outbox-resend", "api:oncall")]


async def test_purge_previews_then_deletes_at_most_max_rows_a_call(
    api: httpx.AsyncClient, store: Store
) -> None:
    for n in range(3):
        await add_delivery(store, f"evt_{n}")
    await settle_all(store, "completed")
    payloads = {"payloads_only": True, "older_than": "0s"}
    preview = await api.post("/purge", json=payloads, headers=bearer(READ))
    assert preview.status_code == 200
    (step,) = preview.json()["steps"]
    assert (preview.json()["dry_run"], step["kind"], step["candidates"], step["deleted"]) == (
        True,
        "payloads",
        3,
        0,
    )
    run = {**payloads, "dry_run": False, "max_rows": 2, "batch": 1}
    refused = await api.post("/purge", json=run, headers=bearer(READ))
    assert (refused.status_code, refused.json()) == (403, {"error": "forbidden"})
    if store.partitions.enabled:  # PostgreSQL: a day partition past the retention retires
        await store.partitions.create_ahead(0, today=datetime.now(UTC).date() - timedelta(days=4))
    ran = (await api.post("/purge", json=run, headers=bearer(OPERATE))).json()
    first = ran["steps"][0]
    assert (first["candidates"], first["deleted"], first["batches"]) == (3, 2, 2)
    retired = [each for each in ran["partitions"] if each["retired"]]
    assert len(retired) == (1 if store.partitions.enabled else 0)
    assert all(0 < each["locked_seconds"] <= each["seconds"] for each in retired), retired
    rest = (await api.post("/purge", json=run, headers=bearer(OPERATE))).json()["steps"][0]
    assert (rest["candidates"], rest["deleted"]) == (1, 1)
    assert await store.retention.count_purgeable_payloads(0) == 0
    # A key retention shorter than a provider's redelivery window is refused.
    short = await api.post(
        "/purge", json={"older_than": "1h", "dry_run": False}, headers=bearer(OPERATE)
    )
    assert (short.status_code, short.json()) == (409, {"error": "refused"})
    for wrong in ({"older_than": "soon"}, {"max_rows": 0}, {"max_rows": 10**9}, {"x": 1}):
        answer = await api.post("/purge", json=wrong, headers=bearer(OPERATE))
        assert (answer.status_code, answer.json()) == (400, {"error": "invalid_argument"})
    assert await _commands(store) == [("purge", "api:oncall")] * 2
