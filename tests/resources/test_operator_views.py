"""Tracked resources in the operators' views, on both stores: the trace of a delivery shows
its transitions and outbox rows, and reconciliation (without the CLI) finds each of the
four resource situations."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys

import httpx

from hookinbox import ops
from hookinbox.app import standard_operator_views
from hookinbox.resources.machine import VIDEO
from hookinbox.resources.service import new_resource_id
from hookinbox.store import ParkPolicy, ResourceEvent, Store
from tests.resources.support import NotifyService, outbox_settings, video_event, video_route
from tests.support.inbox import make_config, running_inbox
from tests.support.journal import add_delivery
from tests.support.processes import REPO, hookinbox_env
from tests.support.waiting import wait_for, wait_for_status

RESOURCE_CHECKS = (
    "terminal_without_delivery",
    "transition_without_outbox",
    "unbound_resources",
    "outbox_unsent",
    "parked_past_deadline",
)


VIEWS = standard_operator_views()


def test_an_inbox_built_by_the_library_has_the_layers_and_checks_without_the_cli() -> None:
    script = (
        "import json, sys\n"
        "from hookinbox import Inbox\n"
        "from hookinbox.config import config_from_mapping\n"
        "inbox = Inbox(config_from_mapping({'database': 'sqlite:///unused.db'}))\n"
        "views = inbox.views\n"
        "print(json.dumps({'layers': sorted(views.trace_layers),"
        " 'checks': [c.name for c in views.checks], 'cli': 'hookinbox.cli' in sys.modules}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=hookinbox_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["cli"] is False
    assert {"transitions", "outbox"} <= set(seen["layers"])
    assert set(RESOURCE_CHECKS) <= set(seen["checks"])


async def test_the_trace_of_a_delivery_shows_its_transitions_and_outbox_rows(
    db_url: str, client: httpx.AsyncClient
) -> None:
    with NotifyService() as notify:
        config = make_config(db_url, routes=[video_route()], outbox=outbox_settings(notify.url))
        async with running_inbox(config) as inbox:
            task = await inbox.inbox.resources.create(
                "video", tenant="acme", owner="user-1", provider_ref="prov-1"
            )
            key = f"video-ready:{task.id}"
            registry = inbox.inbox.metrics.registry

            def counted(outcome: str) -> float:
                labels = {"kind": "video", "outcome": outcome}
                return registry.get_sample_value("hookinbox_resource_events_total", labels) or 0

            before = {o: counted(o) for o in ("applied", "rejected_transition", "tenant_mismatch")}
            sends = (
                ("evt_ready", "ready", "acme"),
                ("evt_late", "processing", "acme"),
                ("evt_evil", "failed", "evil"),
            )
            for event_id, status, tenant in sends:
                body, headers = video_event(event_id, status, "prov-1", tenant=tenant)
                await client.post(inbox.url(), content=body, headers=headers)
                if event_id == "evt_ready":
                    # "Late" means after ready was applied: with four workers the two
                    # could otherwise run in either order and both be applied.
                    await wait_for_status(inbox.store, "evt_ready", "completed", timeout=10)

            async def settled() -> bool:
                done = [await inbox.store.journal.get_delivery(e) for e in ("evt_late", "evt_evil")]
                row = await inbox.store.outbox.get_outbox(key)
                finished = all(d and d.status == "completed" for d in done)
                return bool(finished and row and row.state == "sent")

            await wait_for(settled, 10, "the transition, the rejection and the notification")
            ready = (
                (await ops.trace(inbox.store, config, "evt_ready", layers=VIEWS.trace_layers))
                .deliveries[0]
                .as_json()
            )
            late = (
                (await ops.trace(inbox.store, config, "evt_late", layers=VIEWS.trace_layers))
                .deliveries[0]
                .as_json()
            )
            scraped = (await client.get(f"{inbox.base_url}/metrics")).text
            after = {o: counted(o) for o in before}

    # Each outcome exported (rejections too), not only counted in memory.
    assert {o: after[o] - before[o] for o in before} == {
        "applied": 1,
        "rejected_transition": 1,
        "tenant_mismatch": 1,
    }
    assert 'hookinbox_resource_events_total{kind="video",outcome="tenant_mismatch"}' in scraped

    (applied,) = ready["transitions"]
    assert (applied["resource_id"], applied["from"], applied["to"]) == (
        task.id,
        "submitted",
        "ready",
    )
    assert (applied["outcome"], applied["outbox_key"]) == ("applied", key)
    (row,) = ready["outbox"]
    assert (row["key"], row["state"], row["attempts"]) == (key, "sent", 1)
    assert "body" not in row  # the trace says where, `outbox show` says what
    (rejected,) = late["transitions"]
    assert (rejected["outcome"], rejected["reason"]) == ("rejected", "from_terminal")
    assert rejected["detail"] == "rejected: from_terminal; sent by test; bound to test"
    assert (rejected["source"], rejected["bound_to"]) == ("test", ["test"])
    assert late["outbox"] == []


async def _claimed(store: Store, *event_ids: str) -> dict[str, tuple[str, str, str]]:
    """Deliveries of ``video.ready`` with one ``video`` job each, claimed:
    ``{event_id: (delivery_id, job_id, lease_token)}``."""
    ids = {
        await add_delivery(store, e, actions=("video",), event_type="video.ready"): e
        for e in event_ids
    }
    claimed = await store.queue.claim_due_jobs("test-worker", 100, 30)
    return {ids[c.delivery_id]: (c.delivery_id, c.id, c.lease_token) for c in claimed}


async def test_reconcile_finds_each_resource_situation(store: Store, db_url: str) -> None:
    config = make_config(db_url, outbox={"unsent_after_seconds": 0.001})
    clean = await ops.reconcile(store, config, checks=VIEWS.checks)
    assert {
        f.check: f.count for f in clean.findings if f.check in RESOURCE_CHECKS
    } == dict.fromkeys(RESOURCE_CHECKS, 0)

    # Moved to a terminal state by hand, not by a delivery (and so bound to no source).
    by_hand = await store.resources.create_resource(
        new_resource_id(), "video", tenant="acme", owner="u", state="ready"
    )
    quiet = await store.resources.create_resource(
        new_resource_id(), "video", tenant="acme", owner="u", state="submitted", provider_ref="p-q"
    )
    loud = await store.resources.create_resource(
        new_resource_id(), "video", tenant="acme", owner="u", state="submitted", provider_ref="p-l"
    )
    jobs = await _claimed(store, "evt_quiet", "evt_loud", "evt_early")
    runs = (
        # Applied by a machine that notified nobody: the config's machine wants a row.
        ("evt_quiet", "p-q", dataclasses.replace(VIDEO, notify={}), ParkPolicy()),
        # Applied with its outbox row, which no relay sends (none runs here).
        ("evt_loud", "p-l", VIDEO, ParkPolicy()),
        # A reference nobody attached: parked, and no worker re-checks it at the deadline.
        ("evt_early", "p-nobody", VIDEO, ParkPolicy(park_seconds=0.01)),
    )
    for event_id, ref, machine, park in runs:
        delivery_id, job_id, token = jobs[event_id]
        event = ResourceEvent(
            kind="video",
            provider_ref=ref,
            target="ready",
            tenant=None,
            owner=None,
            event_type="video.ready",
            event_time=None,
            delivery_id=delivery_id,
            job_id=job_id,
        )
        await store.resources.apply_resource_event(job_id, token, "test", event, machine, park)
    await asyncio.sleep(0.1)

    report = await ops.reconcile(store, config, checks=VIEWS.checks)
    found = {f.check: f for f in report.findings}
    assert {name: found[name].count for name in RESOURCE_CHECKS} == dict.fromkeys(
        RESOURCE_CHECKS, 1
    )
    assert found["terminal_without_delivery"].items == [{"ref": by_hand.id, "detail": "ready"}]
    assert found["transition_without_outbox"].items == [{"ref": quiet.id, "detail": "ready"}]
    assert found["unbound_resources"].items == [{"ref": by_hand.id, "detail": "ready"}]
    assert found["outbox_unsent"].items == [{"ref": f"video-ready:{loud.id}", "detail": "pending"}]
    assert found["parked_past_deadline"].items == [{"ref": jobs["evt_early"][1], "detail": ""}]
    assert not report.clean
