"""``hookinbox trace EVENT_ID``: one event through every layer."""

from __future__ import annotations

import click

from hookinbox import ops
from hookinbox.app import standard_operator_views
from hookinbox.cli.attempts import attempt_line
from hookinbox.cli.common import (
    NON_EMPTY,
    config_option,
    json_option,
    opened_store,
    quiet_config,
    reports_errors,
    run,
)
from hookinbox.cli.output import pairs_text, print_json, wrapped_line


@click.command()
@config_option
@click.argument("event_id")
@click.option("--source", type=NON_EMPTY, help="When the event id exists in several sources.")
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
    lines: list[str] = []
    for traced in report.deliveries:
        data = traced.as_json()
        journal, receipts = data["journal"], data["receipts"]
        head = wrapped_line(
            f"{journal['source']} / {journal['event_id']}  {journal['delivery_id']}  "
            f"type={journal['type']}  status={journal['status']}",
            indent="",
            hanging="    ",
        )
        lines += [click.style(line, bold=True) for line in head]
        payload = "kept" if journal["payload_retained"] else "purged"
        lines += wrapped_line(
            f"receipts  first={receipts['first_seen_at']}  last={receipts['last_seen_at']}  "
            f"count={receipts['count']}  conflicts={receipts['conflicts']}  payload={payload}"
            f"  origin={journal['origin']}"
        )
        for route in data["routes"]:
            rest = {k: v for k, v in route.items() if k != "action"}
            lines += wrapped_line(f"route {route['action']}  {pairs_text(rest)}")
        for job in data["jobs"]:
            lines += wrapped_line(
                f"job {job['job_id']}  state={job['state']}  "
                f"attempts={job['attempts']}/{job['max_attempts']}  "
                f"business_id={job['business_id'] or '-'}"
            )
            behind = job["waiting_behind"]
            if behind is not None:
                lines += wrapped_line(
                    f"waiting behind {behind['delivery_id']}  (its key's job "
                    f"{behind['job_id']}  state={behind['state']}  "
                    f"attempts={behind['attempts']}/{behind['max_attempts']}  "
                    f"last_error={behind['last_error'] or '-'}; {behind['ahead']} ahead)",
                    indent="    ",
                    hanging="        ",
                )
            for a in job["attempt_history"]:
                lines += wrapped_line(attempt_line(a), indent="    ", hanging="        ")
        for effect in data["effects"]:
            result = effect["result"]
            result_id = result.get("id", "-") if isinstance(result, dict) else result
            lines += wrapped_line(
                f"effect {effect['key']}  {effect['state']}  result_id={result_id}"
            )
        for action in data["operator_actions"]:
            lines += wrapped_line(
                f"operator {action['at']}  {action['actor']}  {action['command']}"
                f"  {action['job_id'] or action['source'] or ''}"
            )
        shown = ("receipts", "journal", "jobs", "effects", "operator_actions", "routes")
        for name, rows in data.items():
            if name not in shown:
                for row in rows:
                    lines += wrapped_line(f"{name} {pairs_text(row)}")
    for line in lines:
        click.echo(line)
