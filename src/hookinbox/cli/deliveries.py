"""``hookinbox deliveries list|show``: read the journal."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.table import Table

from hookinbox.cli.attempts import attempt_line
from hookinbox.cli.common import (
    config_option,
    opened_store,
    print_json,
    reports_errors,
    run,
)
from hookinbox.config import load_config
from hookinbox.errors import NotFound
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
@click.option("--status", type=click.Choice(JOB_STATES), default=None)
@click.option("--source", default=None)
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@click.option("--before", default=None, help="Page: deliveries older than this delivery id.")
@click.option("--json", "as_json", is_flag=True)
@reports_errors
def deliveries_list(
    config_path: str | None,
    status: Any,
    source: str | None,
    limit: int,
    before: str | None,
    as_json: bool,
) -> None:
    """Newest deliveries first."""
    config = load_config(config_path)

    async def go() -> list[DeliveryView]:
        async with opened_store(config) as store:
            return await store.journal.list_deliveries(
                status=status, source=source, limit=limit, before=before
            )

    rows = run(go())
    if as_json:
        print_json([{k: v for k, v in r.as_json().items() if k != "jobs"} for r in rows])
        return
    table = Table("delivery_id", "source", "event_id", "type", "status", "count", "last_seen")
    for r in rows:
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


@deliveries.command("show")
@config_option
@click.argument("ref")
@click.option("--source", default=None, help="When the event id exists in several sources.")
@click.option("--json", "as_json", is_flag=True)
@reports_errors
def deliveries_show(config_path: str | None, ref: str, source: str | None, as_json: bool) -> None:
    """One delivery by internal id (dlv_...) or event id, with its jobs."""
    config = load_config(config_path)

    async def go() -> tuple[DeliveryView | None, dict[str, list[AttemptView]]]:
        async with opened_store(config) as store:
            found = await store.journal.get_delivery(ref, source)
            jobs = found.jobs if found is not None else []
            return found, {job.id: await store.queue.list_attempts(job.id) for job in jobs}

    found, attempts = run(go())
    if found is None:
        raise NotFound(f"no delivery with id or event id {ref!r}")
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
