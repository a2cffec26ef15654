"""``hookinbox sources list|pause|resume``: pause a source whose provider changed its
contract (the endpoint answers 503 and the provider keeps retrying) and resume it.
"""

from __future__ import annotations

from typing import Any

import click

from hookinbox import ops
from hookinbox.cli.common import (
    NON_EMPTY,
    config_option,
    json_option,
    opened_store,
    quiet_config,
    reports_errors,
    run,
)
from hookinbox.cli.output import Column, Output, output_options, print_json, show_rows
from hookinbox.config import Config

LIST_COLUMNS = (
    Column("source", "id"),
    Column("state"),
    Column("reason", "text", drop=1),
    Column("since", "time", drop=3),
    Column("by", "text", drop=4),
    Column("scheme", drop=5),
    Column("actions", "text", drop=2),
)


@click.group()
def sources() -> None:
    """List sources; pause one (answers 503, the provider retries) or resume it."""


@sources.command("list")
@config_option
@reports_errors
@output_options
def sources_list(config_path: str | None, out: Output) -> None:
    """Configured sources and their state: receiving, paused (with why, since when, by
    whom) or not_configured (a pause kept for a source the config no longer has)."""
    config = quiet_config(config_path)

    async def go() -> ops.SourcesReport:
        async with opened_store(config) as store:
            return await ops.list_sources(store, config)

    report = run(go())
    rows = []
    for row in report.sources:
        state = row.state if row.paused else None
        rows.append(
            (
                row.name,
                row.status,
                state.reason if state else None,
                state.changed_at if state else None,
                state.changed_by if state else None,
                row.scheme,
                ", ".join(row.routes),
            )
        )
    show_rows(out, LIST_COLUMNS, rows, as_json=report.as_json, empty="no sources configured")


def _pause_or_resume(config: Config, name: str, *, pause: bool, reason: str | None) -> Any:
    actor = ops.default_actor()

    async def go() -> Any:
        async with opened_store(config) as store:
            if pause:
                return await ops.pause_source(store, config, name, actor=actor, reason=reason)
            return await ops.resume_source(store, config, name, actor=actor)

    return run(go())


@sources.command("pause")
@config_option
@click.argument("name")
@click.option("--reason", type=NON_EMPTY, help="Why (shown in sources list and the audit).")
@json_option
@reports_errors
def sources_pause(config_path: str | None, name: str, reason: str | None, as_json: bool) -> None:
    """Pause NAME: its endpoint answers 503 + Retry-After until resumed."""
    state = _pause_or_resume(quiet_config(config_path), name, pause=True, reason=reason)
    if as_json:
        print_json(state.as_json())
    else:
        click.echo(f"paused {name}: receivers answer 503 within a few seconds")


@sources.command("resume")
@config_option
@click.argument("name")
@json_option
@reports_errors
def sources_resume(config_path: str | None, name: str, as_json: bool) -> None:
    """Resume NAME: its endpoint accepts deliveries again."""
    state = _pause_or_resume(quiet_config(config_path), name, pause=False, reason=None)
    if as_json:
        print_json(state.as_json())
    else:
        click.echo(f"resumed {name}")
