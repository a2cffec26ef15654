"""``hookinbox reviews list|resolve``: the rejected transitions waiting for an operator.

A transition the state machine refused is never applied; it waits here until someone
resolves it with a note. ``reconcile`` reports the ones older than
``operations.transition_review`` that nobody resolved.
"""

from __future__ import annotations

from datetime import UTC, datetime

import click

from hookinbox import ops
from hookinbox.cli.common import (
    NON_EMPTY,
    config_option,
    json_option,
    opened_store,
    quiet_config,
    reports_errors,
    run,
)
from hookinbox.cli.output import Cell, Column, Output, output_options, print_json, show_rows
from hookinbox.store import TransitionReview


@click.group()
def reviews() -> None:
    """Rejected transitions (a late event, a source or tenant mismatch) waiting for a review."""


#: The largest row id either store can hold (a signed 64-bit integer).
ROW_ID_MAX = 2**63 - 1

LIST_COLUMNS = (
    Column("id", "id"),
    Column("at", "time"),
    Column("resource_id", "id"),
    Column("move", drop=3),
    Column("reason", "text", drop=1),
    Column("review", "text", drop=2),
    Column("event_type", "text", drop=4),
    Column("delivery_id", "id", drop=5),
    Column("source", "text", drop=6),
    Column("kind", wide_only=True),
    Column("tenant", "text", wide_only=True),
    Column("reviewed_at", "time", wide_only=True),
)


def _row(review: TransitionReview, report: ops.ReviewList, now: datetime) -> tuple[Cell, ...]:
    """The id is what ``reviews resolve`` takes; ``review`` says who resolved it, or
    ``OVERDUE`` past operations.transition_review."""
    if review.resolved:
        status = f"by {review.reviewed_by}"
    else:
        status = "OVERDUE" if report.overdue(review, now) else "waiting"
    return (
        review.id,
        review.created_at,
        review.resource_id or "-",
        f"{review.from_state or '?'}->{review.to_state or '?'}",
        review.reason,
        status,
        review.event_type,
        review.delivery_id,
        review.source,
        review.kind,
        review.tenant,
        review.reviewed_at,
    )


@reviews.command("list")
@config_option
@click.option("--all", "include_resolved", is_flag=True, help="Resolved ones too.")
@click.option("--tenant", type=NON_EMPTY, help="Only the lines filed under this tenant.")
@click.option("--source", type=NON_EMPTY, help="Only the lines this source's events wrote.")
@click.option(
    "--before",
    type=click.IntRange(1, ROW_ID_MAX),
    default=None,
    help="Older than this id (next page).",
)
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@reports_errors
@output_options
def reviews_list(
    config_path: str | None, include_resolved: bool, tenant: str | None, source: str | None,
    before: int | None, limit: int, out: Output,
) -> None:  # fmt: skip
    """Rejected transitions, newest first (unreviewed only unless --all). A line is the
    sender's: a refusal for another tenant's resource is under the sender's source and
    tenant, without that resource's id."""
    config = quiet_config(config_path)

    async def go() -> ops.ReviewList:
        async with opened_store(config) as store:
            return await ops.list_reviews(
                store,
                config,
                resolved=include_resolved,
                tenant=tenant,
                source=source,
                before=before,
                limit=limit,
            )

    report = run(go())
    now = datetime.now(UTC)
    show_rows(
        out,
        LIST_COLUMNS,
        [_row(review, report, now) for review in report.reviews],
        as_json=report.as_json,
        empty="no rejected transitions to review",
    )


@reviews.command("resolve")
@config_option
@click.argument("transition_id", type=click.IntRange(1, ROW_ID_MAX))
@click.option("--note", required=True, help="What was decided, and why (kept with the line).")
@json_option
@reports_errors
def reviews_resolve(config_path: str | None, transition_id: int, note: str, as_json: bool) -> None:
    """Mark rejected transition TRANSITION_ID reviewed, with a note."""
    config = quiet_config(config_path)
    actor = ops.default_actor()

    async def go() -> TransitionReview:
        async with opened_store(config) as store:
            return await ops.resolve_review(store, transition_id, actor=actor, note=note)

    review = run(go())
    if as_json:
        print_json(review.as_json())
    else:
        of = review.resource_id or review.reason
        click.echo(f"resolved transition {review.id} of {of} as {actor}")
