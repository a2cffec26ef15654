"""Operator commands of ``hookinbox``: dlq, replay, purge, reconcile, sources, trace.

Each command is a thin shell over :mod:`hookinbox.ops` (the admin page calls the same
functions): parse flags, open the store, call, print a table or ``--json``. Errors are one
line and a non-zero exit through :func:`hookinbox.cli.reports_errors`; ``reconcile``
exits 1 when it finds anything, so cron can alert on it. Who ran a command is recorded
as ``cli:$USER`` (``HOOKINBOX_ACTOR`` overrides).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.table import Table

from hookinbox import ops
from hookinbox.cli import config_option, main, opened_store, print_json, reports_errors, run
from hookinbox.config import Config, load_config, parse_duration
from hookinbox.errors import InvalidArgument, OperationRefused
from hookinbox.logs import configure_logging
from hookinbox.store import iso

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _since(value: str | None) -> datetime | None:
    """``--since 24h`` (that long ago) or an ISO time (``2025-01-31T12:00Z``, UTC if bare)."""
    if value is None:
        return None
    try:
        return datetime.now(UTC) - timedelta(seconds=parse_duration(value))
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"--since: {value!r} is neither a duration nor an ISO time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _duration(flag: str, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise InvalidArgument(f"{flag}: {exc}") from None


def _config(path: str | None) -> Config:
    """Load the config; keep log lines (to stderr) for errors only, so ``--json`` output
    and the one-line refusals stay clean. The audit of every change is in the store."""
    configure_logging("console", "error")
    return load_config(path)


def _out() -> Console:
    return Console(highlight=False, soft_wrap=True)


# -- dead letters ---------------------------------------------------------------------
@main.group()
def dlq() -> None:
    """Dead letters: failed jobs, with reason and review deadline; retry them."""


@dlq.command("list")
@config_option
@click.option("--source", default=None, help="Only this source.")
@click.option("--since", default=None, help="Failed since: a duration (24h) or ISO time.")
@click.option("--limit", type=int, default=50, show_default=True)
@json_option
@reports_errors
def dlq_list(
    config_path: str | None, source: str | None, since: str | None, limit: int, as_json: bool
) -> None:
    """Failed jobs, newest failure first."""
    config = _config(config_path)
    after = _since(since)

    async def go() -> ops.DeadLetterList:
        async with opened_store(config) as store:
            return await ops.dlq_list(store, config, source=source, since=after, limit=limit)

    found = run(go())
    if as_json:
        print_json(found.as_json())
        return
    if not found.jobs:
        click.echo("no dead letters")
        return
    table = Table(
        "job_id",
        "source",
        "event_id",
        "reason",
        "attempts",
        "first_failure",
        "failed_at",
        "review_by",
    )
    for job in found.jobs:
        table.add_row(
            job.id,
            job.source,
            job.event_id,
            job.last_error or "",
            f"{job.attempts}/{job.max_attempts}",
            iso(job.first_failed_at) or "",
            iso(job.failed_at) or "",
            iso(found.deadline(job)) or "",
        )
    _out().print(table)


@dlq.command("retry")
@config_option
@click.argument("job_id", required=False)
@click.option("--all", "retry_all", is_flag=True, help="Retry many (needs --limit).")
@click.option("--limit", type=int, default=None, help="Most dead letters to retry with --all.")
@click.option("--source", default=None, help="With --all: only this source.")
@click.option("--dry-run", is_flag=True, help="Show what would be retried; change nothing.")
@json_option
@reports_errors
def dlq_retry(
    config_path: str | None,
    job_id: str | None,
    retry_all: bool,
    limit: int | None,
    source: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Put dead letters back to accepted, attempts reset: JOB_ID, or --all --limit N."""
    if retry_all == (job_id is not None):
        raise InvalidArgument("give either JOB_ID or --all --limit N")
    if retry_all and limit is None:
        raise OperationRefused("dlq retry --all needs --limit N: a bulk retry is always bounded")
    if job_id is not None and (limit is not None or source is not None):
        raise InvalidArgument("--limit and --source go with --all, not with JOB_ID")
    config = _config(config_path)
    actor = ops.default_actor()

    async def go() -> ops.RetryReport:
        async with opened_store(config) as store:
            if job_id is not None:
                return await ops.dlq_retry(store, config, job_id, actor=actor, dry_run=dry_run)
            assert limit is not None
            return await ops.dlq_retry_all(
                store, config, limit=limit, source=source, actor=actor, dry_run=dry_run
            )

    report = run(go())
    if as_json:
        print_json(report.as_json())
        return
    if not report.items:
        click.echo("no dead letters to retry")
        return
    for item in report.items:
        reason = f": {item.reason}" if item.reason else ""
        click.echo(f"{item.job_id}  {item.outcome}{reason}")
    verb = "would requeue" if dry_run else "requeued"
    click.echo(f"{verb} {sum(i.outcome != 'refused' for i in report.items)} of {len(report.items)}")


# -- replay ---------------------------------------------------------------------------
@main.command()
@config_option
@click.argument("delivery_id", required=False)
@click.option(
    "--outbox",
    "outbox_key",
    default=None,
    help="Instead: send one notification again from its outbox row (the resource is untouched).",
)
@click.option("--action", default=None, help="Only the job of this action.")
@click.option("--dry-run", is_flag=True, help="Show the state and what would run.")
@click.option(
    "--force-effects",
    is_flag=True,
    help="Make the effects again (moves the job's ledger rows aside).",
)
@click.option("--yes", is_flag=True, help="Confirm --force-effects without asking.")
@click.option(
    "--wait",
    "wait_seconds",
    default="30s",
    show_default=True,
    help="How long to wait for a worker to run the jobs (0: do not wait).",
)
@json_option
@reports_errors
def replay(
    config_path: str | None,
    delivery_id: str | None,
    outbox_key: str | None,
    action: str | None,
    dry_run: bool,
    force_effects: bool,
    yes: bool,
    wait_seconds: str,
    as_json: bool,
) -> None:
    """Run a delivery's jobs again through the workers (the effects ledger still applies)."""
    if (delivery_id is None) == (outbox_key is None):
        raise click.UsageError("give a DELIVERY_ID or --outbox KEY (one of them)")
    if outbox_key is not None:
        from hookinbox.cli_resources import resend_command

        resend_command(config_path, outbox_key, as_json)
        return
    assert delivery_id is not None
    config = _config(config_path)
    wait = _duration("--wait", wait_seconds) or 0.0
    if force_effects and not dry_run and not yes:
        if not sys.stdin.isatty():
            raise OperationRefused("--force-effects makes external effects again: add --yes")
        click.confirm(
            f"Replay {delivery_id} and make its external effects AGAIN (a second CRM task, "
            "message, charge...)?",
            abort=True,
            err=True,
        )
    actor = ops.default_actor()

    async def go() -> ops.ReplayReport:
        async with opened_store(config) as store:
            return await ops.replay(
                store,
                config,
                delivery_id,
                actor=actor,
                action=action,
                dry_run=dry_run,
                force_effects=force_effects,
                wait_seconds=wait,
            )

    report = run(go())
    if as_json:
        print_json(report.as_json())
    else:
        d = report.delivery
        click.echo(
            f"delivery {d.id}  source={d.source}  event_id={d.event_id}  "
            f"type={d.event_type}  status={d.status}  received={d.delivery_count}x"
        )
        for item in report.items:
            click.echo(
                f"  {item.action:<16} {item.job_id}  {item.state_before} -> {item.summary()}"
            )
    if report.all_refused:
        raise OperationRefused("nothing was replayed")


# -- retention ------------------------------------------------------------------------
@main.command()
@config_option
@click.option(
    "--older-than",
    default=None,
    help="Key retention [operations.key_retention, 30d]; with --payloads-only "
    "the payload retention [operations.payload_retention, 24h].",
)
@click.option("--payloads-only", is_flag=True, help="Drop only payloads, keep the journal.")
@click.option("--batch", type=int, default=None, help="Rows per transaction [1000].")
@click.option("--dry-run", is_flag=True, help="Count what would go; delete nothing.")
@json_option
@reports_errors
def purge(
    config_path: str | None,
    older_than: str | None,
    payloads_only: bool,
    batch: int | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Delete payloads and old journal keys in bounded batches (never dead letters)."""
    config = _config(config_path)
    age = _duration("--older-than", older_than)
    console = Console(stderr=True)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        disable=as_json or dry_run,
    )
    tasks: dict[str, TaskID] = {}

    def advance(kind: str, done: int, total: int) -> None:
        if kind not in tasks:
            tasks[kind] = progress.add_task(f"purging {kind}", total=total)
        progress.update(tasks[kind], completed=done, total=total)

    async def go() -> ops.PurgeReport:
        async with opened_store(config) as store:
            return await ops.purge(
                store,
                config,
                older_than=age,
                payloads_only=payloads_only,
                batch=batch,
                dry_run=dry_run,
                progress=advance,
            )

    with progress:
        report = run(go())
    if as_json:
        print_json(report.as_json())
        return
    for step in report.steps:
        verb = "would delete" if dry_run else "deleted"
        count = step.candidates if dry_run else step.deleted
        held = (
            f", held {step.held} (unfinished or dead-lettered)" if step.kind == "deliveries" else ""
        )
        click.echo(
            f"{step.kind}: {verb} {count} older than {step.older_than_seconds:g}s"
            f" in {step.batches} batch(es){held}"
        )


# -- reconciliation -------------------------------------------------------------------
@main.command()
@config_option
@click.option("--limit", type=int, default=20, show_default=True, help="Samples per check.")
@json_option
@reports_errors
def reconcile(config_path: str | None, limit: int, as_json: bool) -> None:
    """Report what does not add up; exit 1 when anything is found (for cron)."""
    if limit < 0:
        raise InvalidArgument("--limit cannot be negative")
    config = _config(config_path)

    async def go() -> ops.ReconcileReport:
        async with opened_store(config) as store:
            return await ops.reconcile(store, config, limit=limit)

    report = run(go())
    if as_json:
        print_json(report.as_json())
    else:
        for finding in report.findings:
            mark = "ok " if finding.count == 0 else "!! "
            click.echo(f"{mark}{finding.count:>6}  {finding.title}")
            for item in finding.items:
                since = iso(item["since"]) if hasattr(item.get("since"), "isoformat") else ""
                extra = f" ({item['deliveries']} deliveries)" if "deliveries" in item else ""
                click.echo(
                    f"          {item['id']}  {item.get('source') or ''}  "
                    f"{item.get('detail') or ''}{extra}  {since}"
                )
        click.echo("clean" if report.clean else f"found {report.total} to look at")
    if not report.clean:
        sys.exit(1)


# -- sources --------------------------------------------------------------------------
@main.group()
def sources() -> None:
    """List sources; pause one (answers 503, the provider retries) or resume it."""


@sources.command("list")
@config_option
@json_option
@reports_errors
def sources_list(config_path: str | None, as_json: bool) -> None:
    """Configured sources with their pause state."""
    config = _config(config_path)

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
    _out().print(table)


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
    state = _pause_or_resume(_config(config_path), name, pause=True, reason=reason)
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
    state = _pause_or_resume(_config(config_path), name, pause=False, reason=None)
    if as_json:
        print_json(state.as_json())
    else:
        click.echo(f"resumed {name}")


# -- trace ----------------------------------------------------------------------------
@main.command()
@config_option
@click.argument("event_id")
@click.option("--source", default=None, help="When the event id exists in several sources.")
@json_option
@reports_errors
def trace(config_path: str | None, event_id: str, source: str | None, as_json: bool) -> None:
    """One event through every layer: receipts, journal, jobs, attempts, effects."""
    config = _config(config_path)

    async def go() -> ops.TraceReport:
        async with opened_store(config) as store:
            return await ops.trace(store, config, event_id, source=source)

    report = run(go())
    if as_json:
        print_json(report.as_json())
        return
    console = _out()
    for traced in report.deliveries:
        data = traced.as_json()
        journal, receipts = data["journal"], data["receipts"]
        console.print(
            f"[bold]{journal['source']} / {journal['event_id']}[/bold]  "
            f"{journal['delivery_id']}  type={journal['type']}  "
            f"status={journal['status']}"
        )
        console.print(
            f"  receipts  first={receipts['first_seen_at']}  "
            f"last={receipts['last_seen_at']}  count={receipts['count']}  "
            f"conflicts={receipts['conflicts']}  "
            f"payload={'kept' if journal['payload_retained'] else 'purged'}"
        )
        for job in data["jobs"]:
            console.print(
                f"  job {job['job_id']}  state={job['state']}  "
                f"attempts={job['attempts']}/{job['max_attempts']}  "
                f"business_id={job['business_id'] or '-'}"
            )
            for a in job["attempt_history"]:
                console.print(
                    f"    #{a['number']} {a['trigger']:<9} {a['started_at']} -> "
                    f"{a['ended_at'] or '...'}  {a['outcome'] or 'running'}"
                    f"{'  ' + a['error_code'] if a['error_code'] else ''}"
                )
        for effect in data["effects"]:
            result = effect["result"]
            result_id = result.get("id", "-") if isinstance(result, dict) else result
            console.print(f"  effect {effect['key']}  {effect['state']}  result_id={result_id}")
        for action in data["operator_actions"]:
            console.print(
                f"  operator {action['at']}  {action['actor']}  {action['command']}"
                f"  {action['job_id'] or action['source'] or ''}"
            )
        for name, rows in data.items():
            if name in ("receipts", "journal", "jobs", "effects", "operator_actions"):
                continue
            for row in rows:
                console.print(f"  {name} {row}")
