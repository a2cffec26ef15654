"""``hookinbox trace EVENT_ID``: one event through every layer."""

from __future__ import annotations

import click

from hookinbox import ops
from hookinbox.app import standard_operator_views
from hookinbox.cli.attempts import attempt_line
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


@click.command()
@config_option
@click.argument("event_id")
@click.option("--source", default=None, help="When the event id exists in several sources.")
@json_option
@reports_errors
def trace(config_path: str | None, event_id: str, source: str | None, as_json: bool) -> None:
    """One event through every layer: receipts, journal, jobs, attempts, effects."""
    config = quiet_config(config_path)

    async def go() -> ops.TraceReport:
        async with opened_store(config) as store:
            layers = standard_operator_views().trace_layers
            return await ops.trace(store, config, event_id, source=source, layers=layers)

    report = run(go())
    if as_json:
        print_json(report.as_json())
        return
    out = console()
    for traced in report.deliveries:
        data = traced.as_json()
        journal, receipts = data["journal"], data["receipts"]
        out.print(
            f"[bold]{journal['source']} / {journal['event_id']}[/bold]  "
            f"{journal['delivery_id']}  type={journal['type']}  "
            f"status={journal['status']}"
        )
        out.print(
            f"  receipts  first={receipts['first_seen_at']}  "
            f"last={receipts['last_seen_at']}  count={receipts['count']}  "
            f"conflicts={receipts['conflicts']}  "
            f"payload={'kept' if journal['payload_retained'] else 'purged'}"
        )
        for job in data["jobs"]:
            out.print(
                f"  job {job['job_id']}  state={job['state']}  "
                f"attempts={job['attempts']}/{job['max_attempts']}  "
                f"business_id={job['business_id'] or '-'}"
            )
            for a in job["attempt_history"]:
                out.print(f"    {attempt_line(a)}", markup=False, highlight=False, soft_wrap=True)
        for effect in data["effects"]:
            result = effect["result"]
            result_id = result.get("id", "-") if isinstance(result, dict) else result
            out.print(f"  effect {effect['key']}  {effect['state']}  result_id={result_id}")
        for action in data["operator_actions"]:
            out.print(
                f"  operator {action['at']}  {action['actor']}  {action['command']}"
                f"  {action['job_id'] or action['source'] or ''}"
            )
        for name, rows in data.items():
            if name in ("receipts", "journal", "jobs", "effects", "operator_actions"):
                continue
            for row in rows:
                out.print(f"  {name} {row}")
