"""``hookinbox replay``: run a delivery's jobs again through the same path."""

from __future__ import annotations

import sys

import click

from hookinbox import ops
from hookinbox.cli.common import (
    NON_EMPTY,
    Duration,
    config_option,
    json_option,
    opened_store,
    quiet_config,
    reports_errors,
    run,
)
from hookinbox.cli.output import print_json
from hookinbox.errors import InvalidArgument, OperationRefused

#: The longest ``--wait``: a job that runs longer is followed with ``hookinbox trace``,
#: not by holding a terminal (an unbounded one could wait for ever).
MAX_WAIT = "1h"


@click.command()
@config_option
@click.argument("delivery_id", required=False)
@click.option(
    "--outbox",
    "outbox_key",
    type=NON_EMPTY,
    help="Instead: send one notification again from its outbox row (the resource is untouched).",
)
@click.option("--action", type=NON_EMPTY, help="Only the job of this action.")
@click.option("--source", type=NON_EMPTY, help="When the event id exists in several sources.")
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
    type=Duration(MAX_WAIT),
    default="30s",
    show_default=True,
    help=f"How long to wait for a worker to run the jobs, at most {MAX_WAIT} (0: do not wait).",
)
@json_option
@reports_errors
def replay(
    config_path: str | None,
    delivery_id: str | None,
    outbox_key: str | None,
    action: str | None,
    source: str | None,
    dry_run: bool,
    force_effects: bool,
    yes: bool,
    wait_seconds: float,
    as_json: bool,
) -> None:
    """Run a delivery's jobs again through the workers (the effects ledger still applies)."""
    if (delivery_id is None) == (outbox_key is None):
        raise InvalidArgument("give a DELIVERY_ID or --outbox KEY (one of them)")
    if outbox_key is not None:
        from hookinbox.cli.outbox import resend_command

        resend_command(config_path, outbox_key, as_json)
        return
    assert delivery_id is not None
    config = quiet_config(config_path)
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

    async def go() -> ops.ReplayResult:
        async with opened_store(config) as store:
            return await ops.replay(
                store,
                config,
                delivery_id,
                actor=actor,
                action=action,
                dry_run=dry_run,
                force_effects=force_effects,
                wait_seconds=wait_seconds,
                source=source,
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
