"""``hookinbox purge`` and ``hookinbox reconcile``: retention, and what does not add up.

``reconcile`` exits 1 when it finds anything, so cron can alert on it.
"""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from hookinbox import ops
from hookinbox.app import standard_operator_views
from hookinbox.cli.common import (
    config_option,
    duration_flag,
    json_option,
    opened_store,
    quiet_config,
    reports_errors,
    run,
)
from hookinbox.cli.output import print_json
from hookinbox.errors import InvalidArgument
from hookinbox.store import (
    iso,
)


@click.command()
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
    """Delete payloads and old journal keys in bounded batches (never dead letters); on
    PostgreSQL, retire whole day partitions of payloads past their retention."""
    config = quiet_config(config_path)
    age = duration_flag("--older-than", older_than)
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
        # Started at the first batch, so a refusal is one line with nothing before it.
        if not tasks:
            progress.start()
        if kind not in tasks:
            tasks[kind] = progress.add_task(f"purging {kind}", total=total)
        progress.update(tasks[kind], completed=done, total=total)

    async def go() -> ops.PurgeResult:
        async with opened_store(config) as store:
            return await ops.purge(
                store,
                config,
                older_than=age,
                payloads_only=payloads_only,
                batch=batch,
                dry_run=dry_run,
                progress=advance,
                actor=ops.default_actor(),
            )

    try:
        report = run(go())
    finally:
        if tasks:
            progress.stop()
    if as_json:
        print_json(report.as_json())
        return
    for each in report.partitions:
        if each.retired:
            click.echo(
                f"partition {each.name}: retired, {each.rows - each.held} {each.table} dropped, "
                f"{each.held} held (kept in the default partition) in {each.seconds:.2f} s, "
                f"{each.table} locked {each.locked_seconds:.2f} s of it"
            )
        elif each.deferred == "dry_run":
            kept = {
                "payloads": f"{each.held} payloads",
                "attempts": f"the attempts of {each.held} jobs",
            }.get(each.table, f"{each.held} jobs")
            click.echo(f"partition {each.name}: would retire, {kept} held")
        else:
            held = {"payloads": "payloads", "attempts": "jobs whose attempts stay"}.get(
                each.table, "jobs"
            )
            reason = "a lock was busy" if each.deferred == "lock" else f"too many held {held}"
            click.echo(f"partition {each.name}: not retired this time ({reason})")
    if report.partitions or report.partitions_made:
        retired = sum(1 for each in report.partitions if each.retired)
        click.echo(f"partitions: retired {retired}, made {report.partitions_made} ahead")
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


@click.command()
@config_option
@click.option("--limit", type=int, default=20, show_default=True, help="Samples per check.")
@json_option
@reports_errors
def reconcile(config_path: str | None, limit: int, as_json: bool) -> None:
    """Report what does not add up; exit 1 when anything is found (for cron)."""
    if limit < 0:
        raise InvalidArgument("--limit cannot be negative")
    config = quiet_config(config_path)

    async def go() -> ops.ReconcileReport:
        async with opened_store(config) as store:
            checks = standard_operator_views().checks
            return await ops.reconcile(store, config, checks=checks, limit=limit)

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
