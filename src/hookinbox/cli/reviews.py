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
    config_option,
    json_option,
    opened_store,
    print_json,
    quiet_config,
    reports_errors,
    run,
)
from hookinbox.store import TransitionReview, iso


@click.group()
def reviews() -> None:
    """Rejected transitions (a late event, a tenant mismatch) waiting for a review."""


def _line(review: TransitionReview, report: ops.ReviewList, now: datetime) -> str:
    """One line per review, never cut: the id is what ``reviews resolve`` takes."""
    moved = f"{review.from_state or '?'} -> {review.to_state or '?'}"
    parts = [
        f"{review.id}",
        iso(review.created_at) or "",
        review.kind,
        review.resource_id,
        moved,
        review.reason or "",
        review.event_type or "",
        review.delivery_id or "",
    ]
    if review.resolved:
        parts.append(f"reviewed by {review.reviewed_by} at {iso(review.reviewed_at)}")
    elif report.overdue(review, now):
        parts.append("OVERDUE")
    return "  ".join(parts)


@reviews.command("list")
@config_option
@click.option("--all", "include_resolved", is_flag=True, help="Resolved ones too.")
@click.option("--before", type=int, default=None, help="Older than this id (next page).")
@click.option("--limit", type=int, default=50, show_default=True)
@json_option
@reports_errors
def reviews_list(
    config_path: str | None, include_resolved: bool, before: int | None, limit: int, as_json: bool
) -> None:
    """Rejected transitions, newest first (unreviewed only unless --all)."""
    config = quiet_config(config_path)

    async def go() -> ops.ReviewList:
        async with opened_store(config) as store:
            return await ops.list_reviews(
                store, config, resolved=include_resolved, before=before, limit=limit
            )

    report = run(go())
    if as_json:
        print_json(report.as_json())
        return
    if not report.reviews:
        click.echo("no rejected transitions to review")
        return
    now = datetime.now(UTC)
    click.echo("id  at  kind  resource  from -> to  reason  event type  delivery")
    for review in report.reviews:
        click.echo(_line(review, report, now))


@reviews.command("resolve")
@config_option
@click.argument("transition_id", type=int)
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
        click.echo(f"resolved transition {review.id} of {review.resource_id} as {actor}")
