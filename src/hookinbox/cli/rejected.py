"""``hookinbox rejected list|retry``: deliveries refused for their signature or timestamp,
kept for a while, and checked again once the secret is fixed."""

from __future__ import annotations

import click

from hookinbox.cli.common import (
    NON_EMPTY,
    bulk_needs_limit,
    config_option,
    json_option,
    opened_store,
    quiet_config,
    reports_errors,
    run,
)
from hookinbox.cli.output import Column, Output, output_options, print_json, show_rows
from hookinbox.errors import InvalidArgument, OperationRefused
from hookinbox.ops.actor import default_actor
from hookinbox.ops.rejected_deliveries import RejectedPage, rejected_page

LIST_COLUMNS = (
    Column("id", "id"),
    Column("reason", "text"),
    Column("last_seen", "time", drop=2),
    Column("source", "text", drop=1),
    Column("seen", drop=3),
    Column("bytes", drop=4),
    Column("retry", "text", drop=5),
    Column("first_seen", "time", wide_only=True),
    Column("retry_delivery_id", "id", wide_only=True),
)


@click.group()
def rejected() -> None:
    """Deliveries refused for a signature or timestamp, kept for a retry.

    How many are kept, and for how long, is the rejected table of the config."""


@rejected.command("list")
@config_option
@click.option("--source", type=NON_EMPTY, help="Only this source.")
@click.option("--all", "everything", is_flag=True, help="Include those a retry accepted.")
@click.option("--before", type=NON_EMPTY, help="Page on: the last id of the previous page.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@reports_errors
@output_options
def rejected_list(
    config_path: str | None,
    source: str | None,
    everything: bool,
    before: str | None,
    limit: int,
    out: Output,
) -> None:
    """Kept rejected deliveries, newest first: reason, size, times, retry outcome."""
    config = quiet_config(config_path)

    async def go() -> RejectedPage:
        async with opened_store(config) as store:
            return await rejected_page(
                store, source=source, include_settled=everything, before=before, limit=limit
            )

    page = run(go())
    rows = [
        (
            item.id,
            item.reason,
            item.last_seen_at,
            item.source,
            item.seen,
            item.body_bytes if item.body_kept else f"{item.body_bytes} (not kept)",
            item.retry_outcome,
            item.first_seen_at,
            item.retry_delivery_id,
        )
        for item in page.rejected
    ]
    show_rows(out, LIST_COLUMNS, rows, as_json=page.as_json, empty="no rejected deliveries")


@rejected.command("retry")
@config_option
@click.argument("ids", nargs=-1)
@click.option("--source", type=NON_EMPTY, help="With --all: only this source.")
@click.option(
    "--all", "everything", is_flag=True, help="Every one not yet accepted (needs --limit)."
)
@click.option(
    "--limit", type=click.IntRange(1, 10000), default=None, help="Most to retry with --all."
)
@json_option
@reports_errors
def rejected_retry(
    config_path: str | None,
    ids: tuple[str, ...],
    source: str | None,
    everything: bool,
    limit: int | None,
    as_json: bool,
) -> None:
    """Check kept deliveries again with the current secrets, through the normal path.

    Each is verified as of the time it was received; one that holds is reserved and
    queued like any delivery (a duplicate if the provider redelivered it meanwhile), one
    that does not stays rejected with its new code. Exit 1 if any is still refused."""
    if bool(ids) == everything:
        raise InvalidArgument("give rejected ids, or --all --limit N (and --source)")
    if everything and limit is None:
        raise OperationRefused(bulk_needs_limit("rejected retry --all"))
    if ids and (limit is not None or source is not None):
        raise InvalidArgument("--limit and --source go with --all, not with ids")
    config = quiet_config(config_path)
    config.require_secrets()

    async def go() -> list[dict[str, object]]:
        from hookinbox.app import build_receiver
        from hookinbox.receive.rejected_retry import retry_rejected_many
        from hookinbox.tracing import build_tracing

        async with opened_store(config) as store:
            receiver = build_receiver(config, store, tracing=build_tracing(config))
            results = await retry_rejected_many(
                receiver,
                store,
                ids=list(ids) or None,
                source=source,
                limit=limit or len(ids),
                actor=default_actor(),
            )
            return [result.as_json() for result in results]

    results = run(go())
    if as_json:
        print_json(results)
    else:
        for result in results:
            click.echo(
                f"{result['rejected_id']}  {result['source']}  {result['outcome']}"
                f"  {result['delivery_id'] or ''}".rstrip()
            )
        if not results:
            click.echo("nothing to retry")
    if any(r["outcome"] not in ("accepted", "duplicate") for r in results):
        raise SystemExit(1)
