"""Issue 12, item 9: a transition the state machine rejects goes to a review list
(``hookinbox reviews``, ``/admin/reviews``, the ops functions), is resolved once with a
note, and ``reconcile`` reports the ones unreviewed past ``operations.transition_review``.
The shipped ``video`` machine knows ``video.queued``. Both stores."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from hookinbox import ops
from hookinbox.api import api_routes
from hookinbox.app import standard_operator_views
from hookinbox.config import Config
from hookinbox.errors import InvalidArgument, NotFound, OperationRefused
from hookinbox.store import Store
from tests.admin.support import TOKEN, login
from tests.resources.support import video_event, video_route
from tests.support.inbox import RunningInbox, make_config, running_inbox
from tests.support.processes import REPO, hookinbox_env
from tests.support.waiting import wait_for_status

VIEWS = standard_operator_views()


def review_config(db_url: str, review: str = "1h") -> Config:
    return make_config(db_url, routes=[video_route()], operations={"transition_review": review})


async def send(inbox: RunningInbox, client: httpx.AsyncClient, event_id: str, status: str) -> None:
    body, headers = video_event(event_id, status, "prov-1")
    assert (await client.post(inbox.url(), content=body, headers=headers)).status_code == 200
    await wait_for_status(inbox.store, event_id, "completed")


async def queued_then_late_queued(inbox: RunningInbox, client: httpx.AsyncClient) -> str:
    """``video.queued`` applied, ``video.processing`` applied, a late ``video.queued``
    rejected: one line on the review list."""
    task = await inbox.inbox.resources.create(
        "video", tenant="acme", owner="user-1", provider_ref="prov-1"
    )
    await send(inbox, client, "evt_queued", "queued")
    found = await inbox.store.resources.get_resource(task.id)
    assert found is not None and found.state == "queued"  # not an unmapped_event
    await send(inbox, client, "evt_processing", "processing")
    await send(inbox, client, "evt_late_queued", "queued")
    found = await inbox.store.resources.get_resource(task.id)
    assert found is not None and found.state == "processing"  # never applied
    return task.id


def unreviewed(report: ops.ReconcileReport) -> int:
    (finding,) = [f for f in report.findings if f.check == "unreviewed_transitions"]
    return finding.count


async def test_a_rejected_transition_waits_for_its_review_and_reconcile_reports_it_late(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = review_config(db_url, review="0.2s")
    async with running_inbox(config) as inbox:
        task_id = await queued_then_late_queued(inbox, client)
        store = inbox.store
        (review,) = (await ops.list_reviews(store, config)).reviews
        assert (review.resource_id, review.from_state, review.to_state) == (
            task_id,
            "processing",
            "queued",
        )
        assert review.event_type == "video.queued" and not review.resolved
        await asyncio.sleep(0.3)  # past operations.transition_review
        report = await ops.reconcile(store, config, checks=VIEWS.checks)
        assert unreviewed(report) == 1 and not report.clean

        with pytest.raises(InvalidArgument):
            await ops.resolve_review(store, review.id, actor="cli:ana", note="  ")
        with pytest.raises(NotFound):
            await ops.resolve_review(store, review.id + 1000, actor="cli:ana", note="x")
        done = await ops.resolve_review(
            store, review.id, actor="cli:ana", note="provider resent an old status"
        )
        assert (done.reviewed_by, done.review_note) == ("cli:ana", "provider resent an old status")
        with pytest.raises(OperationRefused):
            await ops.resolve_review(store, review.id, actor="cli:bob", note="again")

        assert (await ops.list_reviews(store, config)).reviews == []
        (kept,) = (await ops.list_reviews(store, config, resolved=True)).reviews
        assert kept.reviewed_by == "cli:ana"  # the first verdict stands
        assert unreviewed(await ops.reconcile(store, config, checks=VIEWS.checks)) == 0
        audit = await store.audit.list_operator_actions()
        assert [(a.command, a.actor) for a in audit if a.command == "review-resolve"] == [
            ("review-resolve", "cli:ana")
        ]


async def test_a_fresh_rejection_is_not_reported_before_its_deadline(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = review_config(db_url, review="1h")
    async with running_inbox(config) as inbox:
        await queued_then_late_queued(inbox, client)
        assert unreviewed(await ops.reconcile(inbox.store, config, checks=VIEWS.checks)) == 0
        assert len((await ops.list_reviews(inbox.store, config)).reviews) == 1


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookinbox.cli", "reviews", *args, "--config", str(config)],
        env=hookinbox_env({"HOOKINBOX_ACTOR": "cli:tester"}),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_reviews_list_and_resolve_from_the_command_line(
    db_url: str, client: httpx.AsyncClient, tmp_path: Path, store: Store
) -> None:
    config = review_config(db_url)
    config_file = tmp_path / "hookinbox.toml"
    config_file.write_text(f'database = "{db_url}"\n')
    async with running_inbox(config) as inbox:
        await queued_then_late_queued(inbox, client)
    listed: Any = json.loads(cli(config_file, "list", "--json").stdout)
    (row,) = listed["reviews"]
    assert (row["from"], row["to"], row["reviewed_at"]) == ("processing", "queued", None)
    text = cli(config_file, "list")
    assert text.returncode == 0 and row["resource_id"] in text.stdout
    resolved = cli(config_file, "resolve", str(row["id"]), "--note", "late callback")
    assert resolved.returncode == 0, resolved.stderr
    again = cli(config_file, "resolve", str(row["id"]), "--note", "again")
    assert again.returncode == 5 and len(again.stderr.strip().splitlines()) == 1
    assert json.loads(cli(config_file, "list", "--json").stdout)["reviews"] == []
    (kept,) = json.loads(cli(config_file, "list", "--all", "--json").stdout)["reviews"]
    assert (kept["reviewed_by"], kept["review_note"]) == ("cli:tester", "late callback")


async def test_the_admin_lists_and_resolves_a_rejected_transition(
    sqlite_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKINBOX_ADMIN_TOKEN", TOKEN)
    async with running_inbox(review_config(sqlite_url)) as inbox:
        task_id = await queued_then_late_queued(inbox, client)
        async with httpx.AsyncClient() as browser:
            await login(browser, inbox.base_url)
            page = await browser.get(f"{inbox.base_url}/admin/reviews")
            assert page.status_code == 200 and task_id in page.text
            (review,) = await inbox.store.reviews.list_reviews()
            csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
            done = await browser.post(
                f"{inbox.base_url}/admin/reviews/{review.id}/resolve",
                data={"csrf": csrf, "note": "late callback, nothing to do"},
            )
            assert done.status_code == 303
            after = await browser.get(inbox.base_url + done.headers["location"])
            assert "resolved" in after.text and task_id not in after.text
            everything = await browser.get(f"{inbox.base_url}/admin/reviews?all=1")
            assert "late callback, nothing to do" in everything.text
            empty_note = await browser.post(
                f"{inbox.base_url}/admin/reviews/{review.id}/resolve",
                data={"csrf": csrf, "note": ""},
            )
            assert empty_note.status_code == 400


async def test_the_api_lists_and_resolves_a_rejected_transition_with_an_operate_token(
    db_url: str, client: httpx.AsyncClient
) -> None:
    read = "reader-token-0123456789abcdef-0123456789"
    operate = "operator-token-0123456789abcdef-0123"
    config = review_config(db_url)
    async with running_inbox(config) as inbox:
        task_id = await queued_then_late_queued(inbox, client)
        routes = api_routes(
            config,
            inbox.store,
            standard_operator_views(),
            {"HOOKINBOX_API_TOKENS": f"ci:read:{read}, oncall:operate:{operate}"},
        )
        transport = httpx.ASGITransport(app=Starlette(routes=routes))
        async with httpx.AsyncClient(transport=transport, base_url="http://ops/api/v1") as api:
            as_reader = {"authorization": f"Bearer {read}"}
            as_operator = {"authorization": f"Bearer {operate}"}
            listed = (await api.get("/reviews", headers=as_reader)).json()
            (review,) = listed["reviews"]
            url = f"/reviews/{review['id']}/resolve"
            note = {"note": "late callback, nothing to do"}
            forbidden = await api.post(url, json=note, headers=as_reader)
            no_note = await api.post(url, headers=as_operator)
            not_a_number = await api.post("/reviews/x1/resolve", json=note, headers=as_operator)
            resolved = await api.post(url, json=note, headers=as_operator)
            again = await api.post(url, json=note, headers=as_operator)
            left = (await api.get("/reviews", headers=as_reader)).json()
        audit = await inbox.store.audit.list_operator_actions()
    assert review["resource_id"] == task_id and review["review_deadline"]
    assert (forbidden.status_code, forbidden.json()) == (403, {"error": "forbidden"})
    assert no_note.status_code == 400 and not_a_number.status_code == 400
    assert resolved.status_code == 200
    assert resolved.json()["reviewed_by"] == "api:oncall"
    assert again.status_code == 409
    assert left["count"] == 0
    assert [(a.actor, a.command) for a in audit if a.command == "review-resolve"] == [
        ("api:oncall", "review-resolve")
    ]
