"""``hookinbox deliveries list|show``: read the journal."""

from __future__ import annotations

from typing import Any

import click

from hookinbox import ops
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
from hookinbox.cli.output import (
    Column,
    Output,
    field_lines,
    output_options,
    print_json,
    show_rows,
    terminal_table,
    wrapped_line,
)
from hookinbox.ops.search import MAX_PAGE
from hookinbox.store import (
    JOB_STATES,
    AttemptView,
    DeliveryView,
)

LIST_COLUMNS = (
    Column("delivery_id", "id"),
    Column("status"),
    Column("last_seen", "time"),
    Column("type", "text", drop=1),
    Column("source", "text", drop=2),
    Column("event_id", "id", drop=3),
    Column("count", drop=4),
    Column("first_seen", "time", wide_only=True),
    Column("origin", wide_only=True),
)
JOB_COLUMNS = (
    Column("action", "id"),
    Column("state"),
    Column("attempts"),
    Column("last_error", "text", drop=1),
    Column("next_attempt", "time", drop=2),
    Column("business_id", "id", drop=3),
)


@click.group()
def deliveries() -> None:
    """Read the journal."""


@deliveries.command("list")
@config_option
@click.option("--id", "ref", type=NON_EMPTY, help="A delivery id, event id or job id.")
@click.option("--status", type=click.Choice(JOB_STATES), default=None)
@click.option("--source", type=NON_EMPTY)
@click.option("--type", "event_type", type=NON_EMPTY, help="A prefix or glob: order, order.*")
@click.option("--since", type=NON_EMPTY, help="Received since: 24h, an ISO time or unix seconds.")
@click.option("--until", type=NON_EMPTY, help="Received before: 24h, an ISO time or unix seconds.")
@click.option(
    "--where",
    "payload",
    type=NON_EMPTY,
    help="A payload field: 'data.object.customer = cus_123' (retained payloads, <= 7 days).",
)
@click.option("--limit", type=click.IntRange(1, MAX_PAGE), default=50, show_default=True)
@click.option("--before", type=NON_EMPTY, help="Page: deliveries older than this delivery id.")
@reports_errors
@output_options
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
    out: Output,
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
    rows = [
        (
            r.id,
            r.status,
            r.last_seen_at,
            r.event_type,
            r.source,
            r.event_id,
            r.delivery_count,
            r.first_seen_at,
            r.origin,
        )
        for r in found.deliveries
    ]
    # JSON: a list, as it always was (the API's search answers the count too).
    show_rows(
        out,
        LIST_COLUMNS,
        rows,
        as_json=lambda: found.as_json()["deliveries"],
        empty="no deliveries match",
    )
    if out.format != "table" or not rows:
        return
    total = f"{found.count}{'+' if found.count_capped else ''}"
    more = f"; older: --before {found.next_before}" if found.next_before else ""
    click.echo(f"{total} matching{more}")


@deliveries.command("show")
@config_option
@click.argument("ref")
@click.option("--source", type=NON_EMPTY, help="When the event id exists in several sources.")
@json_option
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
    keys = (
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
        "origin",
    )
    lines = field_lines([(key, data[key]) for key in keys])
    jobs = [
        (
            job.action,
            job.state,
            f"{job.attempts}/{job.max_attempts}",
            job.last_error,
            job.next_attempt_at if job.state == "accepted" else None,
            job.business_id,
        )
        for job in found.jobs
    ]
    if jobs:
        lines += ["", *terminal_table(JOB_COLUMNS, jobs)]
    for job in data["jobs"]:
        lines.append(click.style(f"{job['action']} attempts", bold=True))
        for a in job["attempt_history"]:
            lines += wrapped_line(attempt_line(a))
    for line in lines:
        click.echo(line)
