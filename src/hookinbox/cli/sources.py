"""``hookinbox sources list|pause|resume``: pause a source whose provider changed its
contract (the endpoint answers 503 and the provider keeps retrying) and resume it.
"""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from hookinbox import ops
from hookinbox.cli.common import (
    config_option,
    console,
    json_option,
    opened_store,
    print_json,
    quiet_config,
    reports_errors,
    run,
)
from hookinbox.config import Config


@click.group()
def sources() -> None:
    """List sources; pause one (answers 503, the provider retries) or resume it."""


@sources.command("list")
@config_option
@json_option
@reports_errors
def sources_list(config_path: str | None, as_json: bool) -> None:
    """Configured sources with their pause state."""
    config = quiet_config(config_path)

    async def go() -> ops.SourcesReport:
        async with opened_store(config) as store:
            return await ops.list_sources(store, config)

    report = run(go())
    if as_json:
        print_json(report.as_json())
        return
    table = Table("source", "scheme", "actions", "state", "reason", "since", "by")
    for row in report.sources:
        data = row.as_json()
        state = "paused" if row.paused else ("active" if row.configured else "not configured")
        table.add_row(
            row.name,
            row.scheme or "",
            ", ".join(row.routes),
            state,
            data["reason"] or "",
            (data["changed_at"] or "") if row.paused else "",
            (data["changed_by"] or "") if row.paused else "",
        )
    console().print(table)


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
@click.option("--reason", default=None, help="Why (shown in sources list and the audit).")
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
