"""The review list of rejected transitions: list them, resolve one with a note.

A transition the state machine refuses (a late ``processing`` after ``ready``, an event
from a source its resource is not bound to, or whose tenant or owner does not match it) is
never applied; it is written to the transition log as ``rejected`` and lands here, filed
under the sender's source and tenant (a mismatch never in the list of the resource's
tenant, and without that resource's id). An operator looks at each (was the
provider wrong, or is our resource?) and resolves it with a note; who and when are kept
on the log line and in the audit. ``reconcile`` reports the ones nobody resolved within
``operations.transition_review`` (24 h by default). The CLI (``hookinbox reviews``) and
the admin (``/admin/reviews``) call these same functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hookinbox.config import Config
from hookinbox.errors import InvalidArgument, NotFound, OperationRefused
from hookinbox.logs import get_logger
from hookinbox.store import Store, TransitionReview, iso

log = get_logger("hookinbox.ops.reviews")

#: The longest review note.
MAX_NOTE = 500
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class ReviewList:
    reviews: list[TransitionReview]
    #: Seconds a rejected transition may wait for its review (operations.transition_review).
    review_seconds: float

    def deadline(self, review: TransitionReview) -> datetime:
        return review.created_at + timedelta(seconds=self.review_seconds)

    def overdue(self, review: TransitionReview, now: datetime) -> bool:
        return not review.resolved and self.deadline(review) < now

    def as_json(self) -> dict[str, Any]:
        return {
            "count": len(self.reviews),
            "review_seconds": self.review_seconds,
            "reviews": [
                {**r.as_json(), "review_deadline": iso(self.deadline(r))} for r in self.reviews
            ],
        }


async def list_reviews(
    store: Store,
    config: Config,
    *,
    resolved: bool = False,
    tenant: str | None = None,
    source: str | None = None,
    before: int | None = None,
    limit: int = 50,
) -> ReviewList:
    """Rejected transitions, newest first: the unreviewed ones, or all with ``resolved``;
    one tenant's or one source's (the sender's) when given."""
    if not 1 <= limit <= 1000:
        raise InvalidArgument("--limit must be between 1 and 1000")
    found = await store.reviews.list_reviews(
        resolved=resolved, tenant=tenant, source=source, before=before, limit=limit
    )
    return ReviewList(found, config.operations.transition_review)


def review_note(value: str) -> str:
    """A note as typed: stripped, 1..MAX_NOTE characters, no control character but a
    newline or a tab."""
    note = value.strip()
    if not note:
        raise InvalidArgument("a review needs a note (what was decided, and why)")
    if len(note) > MAX_NOTE or _CONTROL.search(note):
        raise InvalidArgument(f"the note must be at most {MAX_NOTE} characters of text")
    return note


async def resolve_review(
    store: Store, transition_id: int, *, actor: str, note: str
) -> TransitionReview:
    """Mark one rejected transition reviewed with ``note``; audited. A line that is not
    a rejected transition is NotFound; one already reviewed is OperationRefused (the
    first verdict stands)."""
    note = review_note(note)
    found = await store.reviews.get_review(transition_id)
    if found is None:
        raise NotFound(f"no rejected transition {transition_id}")
    if not await store.reviews.resolve_review(transition_id, actor=actor, note=note):
        current = await store.reviews.get_review(transition_id)
        by = current.reviewed_by if current is not None else "?"
        raise OperationRefused(f"transition {transition_id} was already reviewed by {by}")
    await store.audit.record_operator_action(
        actor=actor,
        command="review-resolve",
        delivery_id=found.delivery_id,
        job_id=found.job_id,
        detail=f"transition {transition_id} of {found.resource_id or found.reason}",
    )
    log.info("review_resolved", transition_id=transition_id, actor=actor)
    resolved = await store.reviews.get_review(transition_id)
    assert resolved is not None
    return resolved
