"""``hookinbox deliveries list|show``: read the journal."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.table import Table

from hookinbox import ops
from hookinbox.cli.attempts import attempt_line
from hookinbox.cli.common import (
    config_option,
    opened_store,
    print_json,
    quiet_config,
    reports_errors,
    run,
)
from hookinbox.ops.search import MAX_PAGE
from hookinbox.store import (
    JOB_STATES,
    AttemptView,
    DeliveryView,
    iso,
)


@click.group()
def deliveries() -> None:
    """Read the journal."""


@deliveries.command("list")
@config_option
@click.option("--id", "ref", default=None, help="A delivery id, event id or job id.")
@click.option("--status", type=click.Choice(JOB_STATES), default=None)
@click.option("--source", default=None)
@click.option("--type", "event_type", default=None, help="A prefix or glob: order, order.*")
@click.option("--since", default=None, help="Received since: 24h, an ISO time or unix seconds.")
@click.option("--until", default=None, help="Received before: 24h, an ISO time or unix seconds.")
@click.option(
    "--where",
    "payload",
    default=None,
    help="A payload field: 'data.object.customer = cus_123' (retained payloads, <= 7 days).",
)
@click.option("--limit", type=click.IntRange(1, MAX_PAGE), default=50, show_default=True)
@click.option("--before", default=None, help="Page: deliveries older than this delivery id.")
@click.option("--json", "as_json", is_flag=True)
@reports_errors
def deliveries_list(
    config_path: str | None,
    ref: str | None,
    status: Any,
    source: str | None,
    event_type: str | None,
    since: str | None,
    until: str | None,
    payload: str | None,
    limit: int,
    before: str | None,
    as_json: bool,
) -> None:
    """Newest deliveries first: the search the admin page and the API run."""
    config = quiet_config(config_path)
    query = ops.DeliveryQuery(
        ref=ref,
        source=source,
        type=event_type,
        status=status,
        since=since,
        until=until,
        payload=payload,
        before=before,
        limit=limit,
    )

    async def go() -> ops.SearchPage:
        async with opened_store(config) as store:
            return await ops.search_deliveries(store, config, query)

    found = run(go())
    if as_json:  # a list, as it always was (the API's search answers the count too)
        print_json(found.as_json()["deliveries"])
        return
    table = Table("delivery_id", "source", "event_id", "type", "status", "count", "last_seen")
    for r in found.deliveries:
        table.add_row(
            r.id,
            r.source,
            r.event_id,
            r.event_type,
            r.status,
            str(r.delivery_count),
            iso(r.last_seen_at),
        )
    Console().print(table)
    total = f"{found.count}{'+' if found.count_capped else ''}"
    more = f"; older: --before {found.next_before}" if found.next_before else ""
    click.echo(f"{total} matching{more}")


@deliveries.command("show")
@config_option
@click.argument("ref")
@click.option("--source", default=None, help="When the event id exists in several sources.")
@click.option("--json", "as_json", is_flag=True)
@reports_errors
def deliveries_show(config_path: str | None, ref: str, source: str | None, as_json: bool) -> None:
    """One delivery by internal id (dlv_...), job id or event id, with its jobs."""
    config = quiet_config(config_path)

    async def go() -> tuple[DeliveryView, dict[str, list[AttemptView]]]:
        async with opened_store(config) as store:
            found = await ops.find_delivery(store, ref, source)
            return found, {job.id: await store.queue.list_attempts(job.id) for job in found.jobs}

    found, attempts = run(go())
    data = found.as_json()
    for job in data["jobs"]:
        job["attempt_history"] = [a.as_json() for a in attempts[job["job_id"]]]
    if as_json:
        print_json(data)
        return
    console = Console()
    for key in (
        "delivery_id",
        "source",
        "event_id",
        "type",
        "status",
        "first_seen_at",
        "last_seen_at",
        "delivery_count",
        "conflicts",
        "body_sha256",
        "payload_retained",
    ):
        console.print(f"[bold]{key:>16}[/bold]  {data[key]}")
    table = Table("action", "state", "attempts", "last_error", "next_attempt_at", "business_id")
    for job in data["jobs"]:
        table.add_row(
            job["action"],
            job["state"],
            f"{job['attempts']}/{job['max_attempts']}",
            job["last_error"] or "",
            job["next_attempt_at"] or "",
            job["business_id"] or "",
        )
    console.print(table)
    for job in data["jobs"]:
        console.print(f"[bold]{job['action']}[/bold] attempts")
        for a in job["attempt_history"]:
            console.print(f"  {attempt_line(a)}", markup=False, highlight=False, soft_wrap=True)
