"""``hookinbox resources create|attach|show|list``: tracked resources from the command line."""

from __future__ import annotations

from typing import Any

import click

from hookinbox.cli.common import (
    NON_EMPTY,
    config_option,
    json_option,
    opened_store,
    quiet_config,
    reports_errors,
    run,
)
from hookinbox.cli.output import (
    Column,
    Output,
    field_lines,
    output_options,
    print_json,
    show_rows,
    terminal_table,
)
from hookinbox.ops.tracked import TrackedResource, list_resources, show_resource
from hookinbox.resources.machine import build_machines
from hookinbox.resources.service import Resources
from hookinbox.store import (
    ResourceView,
    TransitionView,
)

LIST_COLUMNS = (
    Column("resource_id", "id"),
    Column("state"),
    Column("updated", "time", drop=2),
    Column("kind", "text", drop=3),
    Column("tenant", "text", drop=1),
    Column("owner", "text", drop=4),
    Column("provider_ref", "id", drop=5),
    Column("created", "time", wide_only=True),
)
TRANSITION_COLUMNS = (
    Column("at", "time"),
    Column("from"),
    Column("to"),
    Column("outcome"),
    Column("reason", "text", drop=1),
    Column("source", "text", drop=4),
    Column("delivery_id", "id", drop=2),
    Column("outbox_key", "id", drop=3),
)


def _print_resource(
    view: ResourceView, as_json: bool, log: list[TransitionView] | None = None
) -> None:
    data: dict[str, Any] = view.as_json()
    if log is not None:
        data["transitions"] = [t.as_json() for t in log]
    if as_json:
        print_json(data)
        return
    keys = ("resource_id", "kind", "state", "tenant", "owner", "provider_ref", "version")
    fields = [(key, data[key]) for key in keys]
    fields.append(
        ("sources", ", ".join(view.sources) or "not bound yet (the first applied event binds it)")
    )
    lines = field_lines(fields)
    if log:
        rows = [
            (t.created_at, t.from_state, t.to_state, t.outcome, t.reason, t.source,
             t.delivery_id, t.outbox_key)
            for t in log
        ]  # fmt: skip
        lines += ["", *terminal_table(TRANSITION_COLUMNS, rows)]
    for line in lines:
        click.echo(line)


@click.group()
def resources() -> None:
    """Tracked resources (video tasks...) and their transition log."""


@resources.command("create")
@config_option
@click.argument("kind")
@click.option("--tenant", required=True)
@click.option("--owner", required=True)
@click.option("--ref", "provider_ref", type=NON_EMPTY, help="The provider's reference, if known.")
@click.option(
    "--source",
    "sources",
    type=NON_EMPTY,
    multiple=True,
    help="A source whose events may move it (repeat for several); without, the first "
    "event applied binds it to its source.",
)
@json_option
@reports_errors
def resources_create(
    config_path: str | None, kind: str, tenant: str, owner: str, provider_ref: str | None,
    sources: tuple[str, ...], as_json: bool,
) -> None:  # fmt: skip
    """Create a resource in its machine's initial state."""
    config = quiet_config(config_path)

    async def go() -> ResourceView:
        async with opened_store(config) as store:
            api = Resources(store, build_machines(config.machines), config.sources)
            return await api.create(
                kind,
                tenant=tenant,
                owner=owner,
                provider_ref=provider_ref,
                sources=sources or None,
            )

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
            api = Resources(store, build_machines(config.machines), config.sources)
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
    _print_resource(found.resource, as_json, list(found.transitions))


@resources.command("list")
@config_option
@click.option("--kind", type=NON_EMPTY)
@click.option("--tenant", type=NON_EMPTY)
@click.option("--state", type=NON_EMPTY)
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@click.option("--before", type=NON_EMPTY, help="Page: resources older than this id.")
@reports_errors
@output_options
def resources_list(
    config_path: str | None, kind: str | None, tenant: str | None, state: str | None,
    limit: int, before: str | None, out: Output,
) -> None:  # fmt: skip
    """Newest resources first."""
    config = quiet_config(config_path)

    async def go() -> list[ResourceView]:
        async with opened_store(config) as store:
            found = await list_resources(
                store, kind=kind, tenant=tenant, state=state, limit=limit, before=before
            )
            return found.resources

    found = run(go())
    rows = [
        (r.id, r.state, r.updated_at, r.kind, r.tenant, r.owner, r.provider_ref, r.created_at)
        for r in found
    ]
    show_rows(
        out, LIST_COLUMNS, rows, as_json=lambda: [r.as_json() for r in found], empty="no resources"
    )
