"""``hookinbox resources ...`` and ``hookinbox outbox ...``: tracked resources and their
notifications, from the command line. Registered on :data:`hookinbox.cli.main` when
``hookinbox.cli`` imports this module.

``outbox resend KEY`` sends one notification again by re-reading its existing outbox row
(same key, same body); the resource is not touched. ``outbox retry KEY`` does the same
for a dead letter only. Each is recorded in the operators' audit (who, which key).
"""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.table import Table

from hookinbox.cli import config_option, main, opened_store, print_json, reports_errors, run
from hookinbox.config import Config, load_config
from hookinbox.errors import NotFound
from hookinbox.logs import configure_logging
from hookinbox.ops.actor import default_actor
from hookinbox.resource_config import build_machines
from hookinbox.resource_ops import resend_outbox
from hookinbox.resources import Resources
from hookinbox.store import OUTBOX_STATES, OutboxView, ResourceView, iso


def _config(path: str | None) -> Config:
    """Load the config; log lines (to stderr) only for errors, so ``--json`` stays clean."""
    configure_logging("console", "error")
    return load_config(path)


json_flag = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _print_resource(view: ResourceView, as_json: bool, extra: dict[str, Any] | None = None) -> None:
    data = {**view.as_json(), **(extra or {})}
    if as_json:
        print_json(data)
        return
    console = Console()
    for key in ("resource_id", "kind", "state", "tenant", "owner", "provider_ref", "version"):
        console.print(f"[bold]{key:>12}[/bold]  {data[key]}")
    if "transitions" in data:
        table = Table("at", "from", "to", "outcome", "reason", "delivery_id", "outbox_key")
        for t in data["transitions"]:
            table.add_row(
                t["at"], t["from"] or "", t["to"] or "", t["outcome"], t["reason"] or "",
                t["delivery_id"] or "", t["outbox_key"] or "",
            )  # fmt: skip
        console.print(table)


@main.group()
def resources() -> None:
    """Tracked resources (video tasks...) and their transition log."""


@resources.command("create")
@config_option
@click.argument("kind")
@click.option("--tenant", required=True)
@click.option("--owner", required=True)
@click.option("--ref", "provider_ref", default=None, help="The provider's reference, if known.")
@json_flag
@reports_errors
def resources_create(
    config_path: str | None, kind: str, tenant: str, owner: str, provider_ref: str | None,
    as_json: bool,
) -> None:  # fmt: skip
    """Create a resource in its machine's initial state."""
    config = _config(config_path)

    async def go() -> ResourceView:
        async with opened_store(config) as store:
            api = Resources(store, build_machines(config.machines))
            return await api.create(kind, tenant=tenant, owner=owner, provider_ref=provider_ref)

    _print_resource(run(go()), as_json)


@resources.command("attach")
@config_option
@click.argument("resource_id")
@click.argument("provider_ref")
@json_flag
@reports_errors
def resources_attach(
    config_path: str | None, resource_id: str, provider_ref: str, as_json: bool
) -> None:
    """Attach the provider's reference; events parked for it are applied next."""
    config = _config(config_path)

    async def go() -> ResourceView:
        async with opened_store(config) as store:
            api = Resources(store, build_machines(config.machines))
            return await api.attach_ref(resource_id, provider_ref)

    _print_resource(run(go()), as_json)


@resources.command("show")
@config_option
@click.argument("resource_id")
@json_flag
@reports_errors
def resources_show(config_path: str | None, resource_id: str, as_json: bool) -> None:
    """One resource with its transition log (applied and rejected, with reasons)."""
    config = _config(config_path)

    async def go() -> tuple[ResourceView, list[dict[str, Any]]]:
        async with opened_store(config) as store:
            view = await store.get_resource(resource_id)
            if view is None:
                raise NotFound(f"no resource {resource_id!r}")
            log = await store.list_transitions(resource_id)
            return view, [t.as_json() for t in log]

    view, log = run(go())
    _print_resource(view, as_json, {"transitions": log})


@resources.command("list")
@config_option
@click.option("--kind", default=None)
@click.option("--tenant", default=None)
@click.option("--state", default=None)
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@click.option("--before", default=None, help="Page: resources older than this id.")
@json_flag
@reports_errors
def resources_list(
    config_path: str | None, kind: str | None, tenant: str | None, state: str | None,
    limit: int, before: str | None, as_json: bool,
) -> None:  # fmt: skip
    """Newest resources first."""
    config = _config(config_path)

    async def go() -> list[ResourceView]:
        async with opened_store(config) as store:
            return await store.list_resources(
                kind=kind, tenant=tenant, state=state, limit=limit, before=before
            )

    rows = run(go())
    if as_json:
        print_json([r.as_json() for r in rows])
        return
    table = Table("resource_id", "kind", "state", "tenant", "owner", "provider_ref", "updated")
    for r in rows:
        table.add_row(
            r.id, r.kind, r.state, r.tenant, r.owner, r.provider_ref or "", iso(r.updated_at)
        )
    Console().print(table)


# -- outbox -----------------------------------------------------------------------------
@main.group()
def outbox() -> None:
    """Notifications waiting, sent and dead-lettered, by stable key."""


def _print_outbox(rows: list[OutboxView], as_json: bool) -> None:
    if as_json:
        print_json([r.as_json() for r in rows])
        return
    table = Table("key", "kind", "state", "attempts", "last_error", "created", "sent")
    for r in rows:
        table.add_row(
            r.key, r.kind, r.state, str(r.attempts), r.last_error or "", iso(r.created_at),
            iso(r.sent_at) or "",
        )  # fmt: skip
    Console().print(table)


@outbox.command("list")
@config_option
@click.option("--state", type=click.Choice(OUTBOX_STATES), default=None)
@click.option("--kind", default=None)
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@json_flag
@reports_errors
def outbox_list(
    config_path: str | None, state: Any, kind: str | None, limit: int, as_json: bool
) -> None:
    """Newest outbox rows first (``--state failed``: the dead letters)."""
    config = _config(config_path)

    async def go() -> list[OutboxView]:
        async with opened_store(config) as store:
            return await store.list_outbox(state=state, kind=kind, limit=limit)

    _print_outbox(run(go()), as_json)


@outbox.command("show")
@config_option
@click.argument("key")
@json_flag
@reports_errors
def outbox_show(config_path: str | None, key: str, as_json: bool) -> None:
    """One outbox row with its body."""
    config = _config(config_path)

    async def go() -> OutboxView | None:
        async with opened_store(config) as store:
            return await store.get_outbox(key)

    row = run(go())
    if row is None:
        raise NotFound(f"no outbox row {key!r}")
    if as_json:
        print_json(row.as_json())
        return
    console = Console()
    for name, value in row.as_json().items():
        console.print(f"[bold]{name:>16}[/bold]  {value}")


def resend_command(
    config_path: str | None, key: str, as_json: bool, command: str = "replay-outbox"
) -> None:
    """``hookinbox replay --outbox KEY`` and ``outbox resend KEY``."""
    _requeue(config_path, key, False, as_json, command)


def _requeue(
    config_path: str | None, key: str, only_failed: bool, as_json: bool, command: str
) -> None:
    config = _config(config_path)
    actor = default_actor()

    async def go() -> OutboxView:
        async with opened_store(config) as store:
            return await resend_outbox(
                store, key, actor=actor, command=command, only_failed=only_failed
            )

    row = run(go())
    if as_json:
        print_json(row.as_json())
    else:
        click.echo(f"requeued {row.key} ({row.kind}); a relay sends it under the same key")


@outbox.command("retry")
@config_option
@click.argument("key")
@json_flag
@reports_errors
def outbox_retry(config_path: str | None, key: str, as_json: bool) -> None:
    """Send a dead-lettered (failed) notification again."""
    _requeue(config_path, key, True, as_json, "outbox-retry")


@outbox.command("resend")
@config_option
@click.argument("key")
@json_flag
@reports_errors
def outbox_resend(config_path: str | None, key: str, as_json: bool) -> None:
    """Send one notification again from its existing row, sent or not; the resource is not
    touched and the key (the Idempotency-Key) stays the same."""
    resend_command(config_path, key, as_json, "outbox-resend")
