"""``hookinbox resources create|attach|show|list``: tracked resources from the command line."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.table import Table

from hookinbox.cli.common import (
    config_option,
    json_option,
    opened_store,
    print_json,
    quiet_config,
    reports_errors,
    run,
)
from hookinbox.ops.tracked import TrackedResource, list_resources, show_resource
from hookinbox.resources.machine import build_machines
from hookinbox.resources.service import Resources
from hookinbox.store import (
    ResourceView,
    iso,
)


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


@click.group()
def resources() -> None:
    """Tracked resources (video tasks...) and their transition log."""


@resources.command("create")
@config_option
@click.argument("kind")
@click.option("--tenant", required=True)
@click.option("--owner", required=True)
@click.option("--ref", "provider_ref", default=None, help="The provider's reference, if known.")
@json_option
@reports_errors
def resources_create(
    config_path: str | None, kind: str, tenant: str, owner: str, provider_ref: str | None,
    as_json: bool,
) -> None:  # fmt: skip
    """Create a resource in its machine's initial state."""
    config = quiet_config(config_path)

    async def go() -> ResourceView:
        async with opened_store(config) as store:
            api = Resources(store, build_machines(config.machines))
            return await api.create(kind, tenant=tenant, owner=owner, provider_ref=provider_ref)

    _print_resource(run(go()), as_json)


@resources.command("attach")
@config_option
@click.argument("resource_id")
@click.argument("provider_ref")
@json_option
@reports_errors
def resources_attach(
    config_path: str | None, resource_id: str, provider_ref: str, as_json: bool
) -> None:
    """Attach the provider's reference; events parked for it are applied next."""
    config = quiet_config(config_path)

    async def go() -> ResourceView:
        async with opened_store(config) as store:
            api = Resources(store, build_machines(config.machines))
            return await api.attach_ref(resource_id, provider_ref)

    _print_resource(run(go()), as_json)


@resources.command("show")
@config_option
@click.argument("resource_id")
@json_option
@reports_errors
def resources_show(config_path: str | None, resource_id: str, as_json: bool) -> None:
    """One resource with its transition log (applied and rejected, with reasons)."""
    config = quiet_config(config_path)

    async def go() -> TrackedResource:
        async with opened_store(config) as store:
            return await show_resource(store, resource_id)

    found = run(go())
    log = [t.as_json() for t in found.transitions]
    _print_resource(found.resource, as_json, {"transitions": log})


@resources.command("list")
@config_option
@click.option("--kind", default=None)
@click.option("--tenant", default=None)
@click.option("--state", default=None)
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@click.option("--before", default=None, help="Page: resources older than this id.")
@json_option
@reports_errors
def resources_list(
    config_path: str | None, kind: str | None, tenant: str | None, state: str | None,
    limit: int, before: str | None, as_json: bool,
) -> None:  # fmt: skip
    """Newest resources first."""
    config = quiet_config(config_path)

    async def go() -> list[ResourceView]:
        async with opened_store(config) as store:
            found = await list_resources(
                store, kind=kind, tenant=tenant, state=state, limit=limit, before=before
            )
            return found.resources

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
