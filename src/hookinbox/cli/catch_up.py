"""``hookinbox catch-up``: pull what the providers' APIs still hold that the receiver never
got (docs/operations/catch-up.md).

Each source with a ``[sources.NAME.catch_up]`` table (or only ``--source NAME``) is run
once, from its cursor; what each run did is one line (under ``--json``, a list of one
object per run). A run the provider ended (a refused key, an outage, a rate limit past its
bounds) is shown with what it committed, then the command ends with that error's code
and exit 7; the next run resumes at the cursor.
"""

from __future__ import annotations

import click

from hookinbox.catch_up import CatchUpReport, run_catch_up
from hookinbox.cli.common import (
    NON_EMPTY,
    config_option,
    json_option,
    opened_store,
    parse_since,
    quiet_config,
    reports_errors,
    run,
)
from hookinbox.cli.output import print_json
from hookinbox.errors import CatchUpNotConfigured


def _line(report: CatchUpReport) -> str:
    state = "complete" if report.complete else f"stopped: {report.stopped}"
    dry = "  (dry run: nothing reserved or requested)" if report.dry_run else ""
    return (
        f"{report.source} ({report.provider})  pulled={report.pulled}  "
        f"already_had={report.already_had}  new={report.new}  requested={report.requested}  "
        f"delivered={report.delivered}  pages={report.pages}  {state}{dry}"
    )


@click.command("catch-up")
@config_option
@click.option(
    "--source", type=NON_EMPTY, help="Only this source (default: every one with catch_up)."
)
@click.option(
    "--since",
    type=NON_EMPTY,
    help="Look from then (24h, an ISO time) within the window, leaving the cursor alone.",
)
@click.option("--dry-run", is_flag=True, help="List and compare only: reserve and request nothing.")
@json_option
@reports_errors
def catch_up(
    config_path: str | None, source: str | None, since: str | None, dry_run: bool, as_json: bool
) -> None:
    """Pull events the receiver never got from the providers' APIs (Stripe's events,
    GitHub's failed deliveries, Svix's recover), through the same reservation as webhooks."""
    from hookinbox.app import build_receiver, default_metrics

    config = quiet_config(config_path)
    when = parse_since(since)
    names = (
        [source]
        if source is not None
        else [name for name, s in config.sources.items() if s.catch_up is not None]
    )
    if not names:
        raise CatchUpNotConfigured("no source has a [sources.NAME.catch_up] table")

    async def go() -> list[CatchUpReport]:
        async with opened_store(config) as store:
            metrics = default_metrics(config)
            receiver = build_receiver(config, store, metrics=metrics)
            reports = []
            for name in names:
                report = await run_catch_up(
                    config, store, receiver, metrics, name, since=when, dry_run=dry_run
                )
                reports.append(report)
            return reports

    reports = run(go())
    if as_json:
        print_json([report.as_json() for report in reports])
    else:
        for report in reports:
            click.echo(_line(report))
    failed = next((r.failure for r in reports if r.failure is not None), None)
    if failed is not None:
        raise failed
