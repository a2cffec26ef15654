"""``hookinbox dlq list|retry``: the dead letters, and sending them round again."""

from __future__ import annotations

import click

from hookinbox import ops
from hookinbox.cli.common import (
    NON_EMPTY,
    bulk_needs_limit,
    config_option,
    json_option,
    opened_store,
    parse_since,
    quiet_config,
    reports_errors,
    run,
)
from hookinbox.cli.output import Column, Output, output_options, print_json, show_rows
from hookinbox.errors import InvalidArgument, OperationRefused

LIST_COLUMNS = (
    Column("job_id", "id"),
    Column("reason", "text"),
    Column("attempts", drop=3),
    Column("failed", "time", drop=1),
    Column("review_by", "time", drop=4),
    Column("source", "text", drop=2),
    Column("event_id", "id", drop=5),
    Column("first_failure", "time", wide_only=True),
)


@click.group()
def dlq() -> None:
    """Dead letters: failed jobs, with reason and review deadline; retry them."""


@dlq.command("list")
@config_option
@click.option("--source", type=NON_EMPTY, help="Only this source.")
@click.option("--since", type=NON_EMPTY, help="Failed since: a duration (24h) or ISO time.")
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@reports_errors
@output_options
def dlq_list(
    config_path: str | None, source: str | None, since: str | None, limit: int, out: Output
) -> None:
    """Failed jobs, newest failure first."""
    config = quiet_config(config_path)
    after = parse_since(since)

    async def go() -> ops.DeadLetterListing:
        async with opened_store(config) as store:
            return await ops.dlq_list(store, config, source=source, since=after, limit=limit)

    found = run(go())
    rows = [
        (
            job.id,
            job.last_error,
            f"{job.attempts}/{job.max_attempts}",
            job.failed_at,
            found.deadline(job),
            job.source,
            job.event_id,
            job.first_failed_at,
        )
        for job in found.jobs
    ]
    show_rows(out, LIST_COLUMNS, rows, as_json=found.as_json, empty="no dead letters")


@dlq.command("retry")
@config_option
@click.argument("job_id", required=False)
@click.option(
    "--all", "retry_all", is_flag=True, help="Retry many (needs --limit; --dry-run does not)."
)
@click.option(
    "--limit",
    type=click.IntRange(1, 1_000_000),
    default=None,
    help=f"Most dead letters to retry with --all (a --dry-run previews {ops.BULK_PREVIEW}).",
)
@click.option("--source", type=NON_EMPTY, help="With --all: only this source.")
@click.option("--action", type=NON_EMPTY, help="With --all: only this action.")
@click.option("--reason", type=NON_EMPTY, help="With --all: only this last error (http_503...).")
@click.option("--since", type=NON_EMPTY, help="With --all: failed since (24h, ISO, unix).")
@click.option("--until", type=NON_EMPTY, help="With --all: failed before (24h, ISO, unix).")
@click.option(
    "--expect",
    type=click.IntRange(0, 1_000_000),
    default=None,
    help="With --all: retry only if the limit selects exactly this many (as --dry-run showed).",
)
@click.option("--dry-run", is_flag=True, help="Preview: how many match and which; change nothing.")
@json_option
@reports_errors
def dlq_retry(
    config_path: str | None,
    job_id: str | None,
    retry_all: bool,
    limit: int | None,
    source: str | None,
    action: str | None,
    reason: str | None,
    since: str | None,
    until: str | None,
    expect: int | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Put dead letters back to accepted, attempts reset: JOB_ID, or --all --limit N with
    a filter (oldest failure first; --dry-run previews the count and the ids)."""
    filtered = any(v is not None for v in (source, action, reason, since, until, expect))
    if retry_all == (job_id is not None):
        raise InvalidArgument("give either JOB_ID or --all --limit N")
    bounded = ops.bulk_limit(limit, dry_run=dry_run)
    if retry_all and bounded is None:
        raise OperationRefused(bulk_needs_limit("dlq retry --all"))
    if job_id is not None and (limit is not None or filtered):
        raise InvalidArgument("--limit and the filters go with --all, not with JOB_ID")
    matching = ops.DeadLetterFilter(
        source=source,
        action=action,
        reason=reason,
        since=parse_since(since, "--since"),
        until=parse_since(until, "--until"),
    )
    config = quiet_config(config_path)
    actor = ops.default_actor()

    async def go() -> ops.DlqRetryResult:
        async with opened_store(config) as store:
            if job_id is not None:
                return await ops.dlq_retry(
                    store, config, job_id.strip(), actor=actor, dry_run=dry_run
                )
            assert bounded is not None  # refused above
            return await ops.dlq_retry_all(
                store,
                config,
                limit=bounded,
                matching=matching,
                expect=expect,
                actor=actor,
                dry_run=dry_run,
            )

    report = run(go())
    if as_json:
        print_json(report.as_json())
        return
    if report.matched is not None:
        click.echo(f"{report.matched} dead letters match; the limit selects {len(report.items)}")
    if not report.items:
        click.echo("no dead letters to retry")
        return
    for item in report.items:
        why = f": {item.reason}" if item.reason else ""
        click.echo(f"{item.job_id}  {item.outcome}{why}")
    verb = "would requeue" if dry_run else "requeued"
    click.echo(f"{verb} {sum(i.outcome != 'refused' for i in report.items)} of {len(report.items)}")
    if dry_run and report.matched is not None:
        bound = f"--limit {ops.BULK_PREVIEW} " if limit is None else ""
        click.echo(
            f"to retry exactly these: add {bound}--expect {len(report.items)} and drop --dry-run"
        )
