"""A tracked resource is bound to the sources that may move it, and a route may pin its
tenant: another tenant's source is refused (``source_mismatch``) into its own review list,
from the command line, over HTTP and after an upgrade, on both stores."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookinbox.app import Inbox
from hookinbox.config import config_from_mapping
from hookinbox.errors import ConfigError, InvalidArgument, UnknownSource
from hookinbox.ids import new_delivery_id
from hookinbox.resources.machine import VIDEO
from hookinbox.resources.service import new_resource_id
from hookinbox.store import ParkPolicy, ResourceEvent, Store, open_store_for
from hookinbox.store.decisions import claim_mismatch, line_tenant
from hookinbox.store.postgres import driver as pg_driver
from hookinbox.store.sql import Sql
from hookinbox.store.sqlite import driver as sqlite_driver
from tests.resources.support import video_event, video_route
from tests.support.inbox import running_inbox
from tests.support.journal import add_delivery
from tests.support.processes import REPO, hookinbox_env
from tests.support.signing import SECRET_ENV
from tests.support.waiting import wait_for_status

TENANT_B_SECRET = "whsec_" + base64.b64encode(b"tenant-b-signing-secret-01234567").decode()
TENANT_B_ENV = "HB_TENANT_B_SECRET"


def two_tenants(db_url: str, **tenant_b_route: Any) -> dict[str, Any]:
    """Source ``acme`` and source ``tenant-b``, each with its own secret and a video route."""
    return {
        "database": db_url,
        "sources": {
            "acme": {"scheme": "standard-webhooks", "secret_env": SECRET_ENV,
                     "routes": [video_route()]},
            "tenant-b": {"scheme": "standard-webhooks", "secret_env": TENANT_B_ENV,
                         "routes": [video_route(**tenant_b_route)]},
        },
        "worker": {"poll_interval_seconds": 0.2, "backoff_base_seconds": 0.2,
                   "backoff_max_seconds": 1},
    }  # fmt: skip


def toml_of(db_url: str) -> str:
    """The same two sources as a config file, for the command line."""
    lines = [f'database = "{db_url}"']
    for name, env in (("acme", SECRET_ENV), ("tenant-b", TENANT_B_ENV)):
        lines += [
            f'[sources."{name}"]',
            'scheme = "standard-webhooks"',
            f'secret_env = "{env}"',
            f'[[sources."{name}".routes]]',
            'events = ["video.*"]',
            'action = "video"',
            f'[sources."{name}".routes.resource]',
            'kind = "video"',
            'ref = "/data/task_id"',
            'tenant = "/data/tenant_id"',
        ]
    return "\n".join(lines) + "\n"


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookinbox.cli", *args, "--config", str(config)],
        env=hookinbox_env({TENANT_B_ENV: TENANT_B_SECRET, "COLUMNS": "200"}),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def forged_by_b(
    inbox: Any, client: httpx.AsyncClient, event_id: str, task_id: str, claims: str = "acme"
) -> None:
    """``video.processing`` about ``task_id``, claiming tenant ``claims``, signed with
    tenant B's own secret and sent to B's own endpoint: the signature holds."""
    body, headers = video_event(
        event_id, "processing", task_id, tenant=claims, secret=TENANT_B_SECRET
    )
    answer = await client.post(inbox.url("tenant-b"), content=body, headers=headers)
    assert answer.status_code == 200 and answer.json()["status"] == "accepted"
    await wait_for_status(inbox.store, event_id, "completed")


async def test_a_resource_created_for_acmes_source_refuses_tenant_b_from_the_first_event(
    db_url: str, client: httpx.AsyncClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TENANT_B_ENV, TENANT_B_SECRET)
    config_file = tmp_path / "hookinbox.toml"
    config_file.write_text(toml_of(db_url))
    assert cli(config_file, "migrate").returncode == 0
    unknown = cli(config_file, "resources", "create", "video", "--tenant", "acme",
                  "--owner", "user-1", "--source", "nobody")  # fmt: skip
    assert unknown.returncode != 0 and unknown.stdout == ""
    (line,) = unknown.stderr.strip().splitlines()
    assert line.endswith("no source named 'nobody' in the config")
    created = cli(config_file, "resources", "create", "video", "--tenant", "acme", "--owner",
                  "user-1", "--ref", "task-acme-1", "--source", "acme", "--json")  # fmt: skip
    assert created.returncode == 0, created.stderr
    task = json.loads(created.stdout)
    assert task["sources"] == ["acme"]

    async with running_inbox(config_from_mapping(two_tenants(db_url))) as inbox:
        # No event of acme's came first: the binding is the one given at creation.
        await forged_by_b(inbox, client, "evt_b_first", "task-acme-1")
        resource = await inbox.store.resources.get_resource(task["resource_id"])
        assert resource is not None and resource.state == "submitted"

    theirs = json.loads(
        cli(config_file, "reviews", "list", "--source", "tenant-b", "--json").stdout
    )
    acmes = json.loads(cli(config_file, "reviews", "list", "--tenant", "acme", "--json").stdout)
    (review,) = theirs["reviews"]
    assert (review["reason"], review["source"], review["tenant"]) == (
        "source_mismatch",
        "tenant-b",
        None,
    )
    assert review["resource_id"] is None and task["resource_id"] not in json.dumps(theirs)
    assert acmes["reviews"] == []
    listed = cli(config_file, "reviews", "list", "--source", "tenant-b", "--wide")
    assert "source_mismatch" in listed.stdout and task["resource_id"] not in listed.stdout

    shown = cli(config_file, "resources", "show", task["resource_id"])
    assert shown.returncode == 0, shown.stderr
    assert "sources" in shown.stdout and "acme" in shown.stdout
    assert "source_mismatch" in shown.stdout and "tenant-b" in shown.stdout  # the owner's log
    traced = json.loads(cli(config_file, "trace", "evt_b_first", "--json").stdout)
    (line,) = traced["deliveries"][0]["transitions"]
    assert line["detail"] == "rejected: source_mismatch; sent by tenant-b; bound to acme"


async def test_a_pinned_tenant_is_the_routes_whatever_the_body_claims(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tenant B's route says ``tenant = "tenant-b"``: its body claiming acme changes
    nothing. Acme's resource, not bound yet, is refused as a tenant mismatch filed under
    tenant-b, and stays unbound for acme's own provider."""
    monkeypatch.setenv(TENANT_B_ENV, TENANT_B_SECRET)
    monkeypatch.setenv("HOOKINBOX_API_TOKENS", "ci:read:reader-token-0123456789abcdef-01")
    config = config_from_mapping(two_tenants(db_url, tenant="tenant-b"))
    async with running_inbox(config) as inbox:
        task = await inbox.inbox.resources.create(
            "video", tenant="acme", owner="user-1", provider_ref="task-acme-1"
        )
        mine = await inbox.inbox.resources.create(
            "video", tenant="tenant-b", owner="user-1", provider_ref="task-b-1"
        )
        await forged_by_b(inbox, client, "evt_b_claims_acme", "task-acme-1")
        # B's own task: the body may claim anyone, the route's tenant is what counts.
        await forged_by_b(inbox, client, "evt_b_own", "task-b-1", claims="globex")
        body, headers = video_event("evt_acme", "processing", "task-acme-1")
        await client.post(inbox.url("acme"), content=body, headers=headers)
        await wait_for_status(inbox.store, "evt_acme", "completed")
        refused = await inbox.store.journal.get_delivery("evt_b_claims_acme")
        resource = await inbox.store.resources.get_resource(task.id)
        own = await inbox.store.resources.get_resource(mine.id)
        api = f"{inbox.base_url}/api/v1/reviews"
        auth = {"authorization": "Bearer reader-token-0123456789abcdef-01"}
        by_tenant = {
            tenant: (await client.get(api, params={"tenant": tenant}, headers=auth)).json()
            for tenant in ("acme", "tenant-b")
        }
        bad = await client.get(api, params={"tenant": "a\x01"}, headers=auth)
    assert refused is not None and refused.jobs[0].last_error == "tenant_mismatch"
    assert resource is not None and (resource.state, resource.sources) == ("processing", ("acme",))
    assert own is not None and (own.state, own.sources) == ("processing", ("tenant-b",))
    assert by_tenant["acme"]["reviews"] == []
    (review,) = by_tenant["tenant-b"]["reviews"]
    assert (review["reason"], review["source"], review["resource_id"]) == (
        "tenant_mismatch",
        "tenant-b",
        None,
    )
    assert bad.status_code == 400


@pytest.mark.parametrize(
    "tenant", ["", " acme", "acme ", "ac\nme", "acme\n", "tab\there", "c\x9b1", "x" * 201]
)
def test_a_pinned_tenant_is_a_name_or_a_pointer(tenant: str) -> None:
    with pytest.raises(ConfigError, match=r"routes\.0\.resource\.tenant"):
        config_from_mapping(two_tenants("sqlite:///x.db", tenant=tenant))


def test_a_literal_tenant_pins_and_a_pointer_does_not() -> None:
    pinned = config_from_mapping(two_tenants("sqlite:///x.db", tenant="Acme Corp"))
    pointed = config_from_mapping(two_tenants("sqlite:///x.db"))
    binding = pinned.sources["tenant-b"].routes[0].resource
    assert binding is not None and binding.pinned_tenant == "Acme Corp"
    binding = pointed.sources["tenant-b"].routes[0].resource
    assert binding is not None and binding.pinned_tenant is None


async def test_sources_given_at_creation_are_configured_names(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TENANT_B_ENV, TENANT_B_SECRET)
    config = config_from_mapping(two_tenants(db_url))
    inbox = Inbox(config, run_workers=False)
    await inbox.store.open()
    try:
        resources = inbox.resources
        for wrong, error, message in (
            ("acme", InvalidArgument, "a list of source names"),
            ([], InvalidArgument, "at least one source"),
            (["acme", "nobody"], UnknownSource, "no source named 'nobody'"),
            (["ac,me"], InvalidArgument, "is not a source name"),
        ):
            with pytest.raises(error, match=message):
                await resources.create("video", tenant="acme", owner="u", sources=wrong)
        both = await resources.create(
            "video", tenant="acme", owner="u", sources=["tenant-b", "acme", "acme"]
        )
        assert both.sources == ("acme", "tenant-b")
        assert (await resources.require(both.id)).as_json()["sources"] == ["acme", "tenant-b"]
    finally:
        await inbox.store.close()


async def apply_from(store: Store, source: str, ref: str, status: str, event_id: str) -> Any:
    """A ``video.{status}`` event about ``ref`` from ``source``, applied through the
    store's own reserve, claim and apply."""
    delivery_id = await add_delivery(
        store, event_id, source=source, actions=("video",), event_type=f"video.{status}"
    )
    (job,) = await store.queue.claim_due_jobs("test-worker", 100, 30)
    event = ResourceEvent(
        kind="video",
        provider_ref=ref,
        target=status,
        tenant=None,
        owner=None,
        event_type=f"video.{status}",
        event_time=None,
        delivery_id=delivery_id,
        job_id=job.id,
    )
    return await store.resources.apply_resource_event(
        job.id, job.lease_token, source, event, VIDEO, ParkPolicy()
    )


async def test_a_resource_bound_to_two_sources_is_moved_by_either_and_no_other(
    store: Store,
) -> None:
    task = await store.resources.create_resource(
        new_resource_id(), "video", tenant="acme", owner="u", state="submitted",
        provider_ref="p-2", sources=["acme-backup", "acme"],
    )  # fmt: skip
    outcomes = [
        (await apply_from(store, source, "p-2", status, f"evt_{n}")).outcome
        for n, (source, status) in enumerate(
            [("acme-backup", "queued"), ("tenant-b", "processing"), ("acme", "processing")]
        )
    ]
    found = await store.resources.get_resource(task.id)
    assert outcomes == ["applied", "source_mismatch", "applied"]
    assert found is not None and found.sources == ("acme", "acme-backup")


_OLD_DELIVERY = Sql(
    "INSERT INTO deliveries (id, source, event_id, event_type, body_sha256, first_seen_at,"
    " last_seen_at) VALUES (:id, :source, :event_id, 'video.processing', 'old', {now}, {now})"
)
_OLD_ROWS = (
    "INSERT INTO resources (id, kind, tenant, owner, state, provider_ref, created_at,"
    " updated_at) VALUES (:id, 'video', 'acme', 'u', 'queued', 'p-old', {now}, {now})",
    "INSERT INTO resource_transitions (resource_id, from_state, to_state, outcome, reason,"
    " delivery_id, created_at) VALUES (:id, 'queued', 'submitted', 'rejected',"
    " 'invalid_transition', :late, {now})",
    "INSERT INTO resource_transitions (resource_id, from_state, to_state, outcome, reason,"
    " delivery_id, created_at) VALUES (:id, 'queued', 'ready', 'rejected', 'tenant_mismatch',"
    " :cross, {now})",
)


async def test_a_resource_from_before_the_upgrade_is_bound_by_its_next_applied_event(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows written before migration 016: the resource is unbound (reconcile says so)
    until its next applied event binds it; the old refusal of its own provider stays in
    acme's list, the old tenant mismatch goes to no tenant's."""
    resource_id = new_resource_id()
    with monkeypatch.context() as patched:
        for module in (pg_driver, sqlite_driver):
            load = module.load_migrations
            patched.setattr(
                module,
                "load_migrations",
                lambda *a, load=load: [m for m in load(*a) if m.version < 16],
            )
        old = open_store_for(db_url)
        await old.open()
        try:
            # Written as the old code did, by plain SQL: today's reservation statements
            # name columns of later migrations.
            late, cross = new_delivery_id(), new_delivery_id()
            for delivery_id, event_id, source in (
                (late, "evt_old_late", "acme"),
                (cross, "evt_old_cross", "tenant-b"),
            ):
                await old._db.count(_OLD_DELIVERY, id=delivery_id, event_id=event_id, source=source)
            for text in _OLD_ROWS:
                await old._db.count(Sql(text), id=resource_id, late=late, cross=cross)
        finally:
            await old.close()

    upgraded = open_store_for(db_url)
    await upgraded.open()
    try:
        before = await upgraded.resources.get_resource(resource_id)
        reviews = await upgraded.reviews.list_reviews()
        acmes = await upgraded.reviews.list_reviews(tenant="acme")
        findings = await upgraded.resources.resource_findings([VIDEO], outbox_unsent_seconds=60)
        outcome = await apply_from(upgraded, "acme", "p-old", "processing", "evt_new")
        refused = await apply_from(upgraded, "tenant-b", "p-old", "ready", "evt_b")
        after = await upgraded.resources.get_resource(resource_id)
    finally:
        await upgraded.close()
    assert before is not None and before.sources == ()
    assert [f.ref for f in findings if f.check == "unbound_resources"] == [resource_id]
    assert {(r.reason, r.source, r.tenant) for r in reviews} == {
        ("invalid_transition", "acme", "acme"),
        ("tenant_mismatch", "tenant-b", None),
    }
    assert [r.reason for r in acmes] == ["invalid_transition"]
    assert (outcome.outcome, refused.outcome) == ("applied", "source_mismatch")
    assert after is not None and (after.state, after.sources) == ("processing", ("acme",))


def _asking(tenant: str | None, *, pinned: bool = False, owner: str | None = None) -> Any:
    return ResourceEvent(
        kind="video",
        provider_ref="p",
        target="ready",
        tenant=tenant,
        owner=owner,
        event_type="video.ready",
        event_time=None,
        delivery_id="dlv_1",
        job_id="dlv_1:video",
        tenant_pinned=pinned,
    )


@pytest.mark.parametrize(
    ("source", "event", "checked", "filed_under"),
    [
        # Bound to acme: tenant-b is refused whatever it claims; filed under what it is owed.
        ("tenant-b", _asking("acme"), "source_mismatch", None),
        ("tenant-b", _asking("acme", pinned=True), "source_mismatch", "acme"),
        ("tenant-b", _asking("tenant-b"), "source_mismatch", "tenant-b"),
        ("tenant-b", _asking(None), "source_mismatch", None),
        ("tenant-b", _asking(""), "source_mismatch", None),
        # Its own source: the tenant, then the owner, decide.
        ("acme", _asking("globex"), "tenant_mismatch", "globex"),
        ("acme", _asking(""), "tenant_mismatch", None),
        ("acme", _asking("acme", owner="user-2"), "owner_mismatch", "acme"),
        ("acme", _asking(None, owner="user-2"), "owner_mismatch", None),
        ("acme", _asking("acme", owner="user-1"), None, "acme"),
        ("acme", _asking(None), None, "acme"),
    ],
)
def test_a_refusal_is_filed_under_the_senders_tenant_never_the_resources(
    source: str, event: ResourceEvent, checked: str | None, filed_under: str | None
) -> None:
    resource = {"tenant": "acme", "owner": "user-1", "sources": "acme,acme-backup"}
    mismatch = claim_mismatch(source, event, resource)
    assert (mismatch, line_tenant(event, resource, mismatch)) == (checked, filed_under)


def test_an_unbound_resource_checks_only_tenant_and_owner() -> None:
    resource = {"tenant": "acme", "owner": "user-1", "sources": None}
    assert claim_mismatch("anyone", _asking("acme"), resource) is None
    assert claim_mismatch("anyone", _asking("globex"), resource) == "tenant_mismatch"
