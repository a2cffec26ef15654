"""``hookinbox outbox list|show|retry|resend``: the notifications tracked resources send.

``outbox resend KEY`` sends one notification again by re-reading its existing outbox row
(same key, same body); the resource is not touched. ``outbox retry KEY`` does the same
for a dead letter only. Each is recorded in the operators' audit (who, which key).
"""

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
)
from hookinbox.ops.actor import default_actor
from hookinbox.ops.outbox import list_outbox, resend_outbox, show_outbox
from hookinbox.store import (
    OUTBOX_STATES,
    OutboxView,
)

LIST_COLUMNS = (
    Column("key", "id"),
    Column("state"),
    Column("attempts", drop=3),
    Column("last_error", "text", drop=1),
    Column("created", "time", drop=2),
    Column("sent", "time", drop=4),
    Column("kind", "text", drop=5),
    Column("resource_id", "id", wide_only=True),
)


@click.group()
def outbox() -> None:
    """Notifications waiting, sent and dead-lettered, by stable key."""


@outbox.command("list")
@config_option
@click.option("--state", type=click.Choice(OUTBOX_STATES), default=None)
@click.option("--kind", type=NON_EMPTY)
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@reports_errors
@output_options
def outbox_list(
    config_path: str | None, state: Any, kind: str | None, limit: int, out: Output
) -> None:
    """Newest outbox rows first (--state failed: the dead letters)."""
    config = quiet_config(config_path)

    async def go() -> list[OutboxView]:
        async with opened_store(config) as store:
            return await list_outbox(store, state=state, kind=kind, limit=limit)

    found = run(go())
    rows = [
        (r.key, r.state, r.attempts, r.last_error, r.created_at, r.sent_at, r.kind, r.resource_id)
        for r in found
    ]
    show_rows(
        out,
        LIST_COLUMNS,
        rows,
        as_json=lambda: [r.as_json() for r in found],
        empty="no outbox rows",
    )


@outbox.command("show")
@config_option
@click.argument("key")
@json_option
@reports_errors
def outbox_show(config_path: str | None, key: str, as_json: bool) -> None:
    """One outbox row with its body."""
    config = quiet_config(config_path)

    async def go() -> OutboxView:
        async with opened_store(config) as store:
            return await show_outbox(store, key)

    row = run(go())
    if as_json:
        print_json(row.as_json())
        return
    for line in field_lines(list(row.as_json().items())):
        click.echo(line)


def resend_command(
    config_path: str | None, key: str, as_json: bool, command: str = "replay-outbox"
) -> None:
    """``hookinbox replay --outbox KEY`` and ``outbox resend KEY``."""
    _requeue(config_path, key, False, as_json, command)


def _requeue(
    config_path: str | None, key: str, only_failed: bool, as_json: bool, command: str
) -> None:
    config = quiet_config(config_path)
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
@json_option
@reports_errors
def outbox_retry(config_path: str | None, key: str, as_json: bool) -> None:
    """Send a dead-lettered (failed) notification again."""
    _requeue(config_path, key, True, as_json, "outbox-retry")


@outbox.command("resend")
@config_option
@click.argument("key")
@json_option
@reports_errors
def outbox_resend(config_path: str | None, key: str, as_json: bool) -> None:
    """Send one notification again from its existing row, sent or not; the resource is not
    touched and the key (the Idempotency-Key) stays the same."""
    resend_command(config_path, key, as_json, "outbox-resend")
