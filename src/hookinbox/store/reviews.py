"""The review list of rejected transitions: the transition log's ``rejected`` lines (a
late ``processing`` after ``ready``, a source, tenant or owner mismatch), which the state
machine never applied and an operator should look at, and the operator's verdict on each.

A line belongs to its sender: it carries the source that sent the event and the tenant
that sender is entitled to (migration 016), so a list kept by tenant or source shows a
refusal to whoever sent it. A mismatch names neither the id nor the state of the
resource it was refused: that resource is another party's.

A review is three columns on the log line itself (``reviewed_at``, ``reviewed_by``,
``review_note``, migration 005): the log stays the one record of what was tried, and
resolving a line is one conditional UPDATE, so two operators cannot both resolve it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hookinbox.store.records import Record, iso
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_statements("reviews")
_LIST = _SQL["list"]
_GET = _SQL["get"]
_RESOLVE = _SQL["resolve"]


@dataclass(frozen=True, slots=True)
class TransitionReview(Record):
    """A rejected transition and its review (None until an operator resolved it)."""

    id: int
    #: None on a mismatch (the resource is not the sender's to see).
    resource_id: str | None
    kind: str
    #: The source that sent the event, and the tenant the line is filed under: the
    #: sender's, never that of a resource it was refused (None: no tenant it is owed).
    source: str | None
    tenant: str | None
    from_state: str | None
    to_state: str | None
    reason: str | None
    delivery_id: str | None
    job_id: str | None
    event_type: str | None
    created_at: datetime
    reviewed_at: datetime | None
    reviewed_by: str | None
    review_note: str | None

    @property
    def resolved(self) -> bool:
        return self.reviewed_at is not None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "resource_id": self.resource_id,
            "kind": self.kind,
            "source": self.source,
            "tenant": self.tenant,
            "from": self.from_state,
            "to": self.to_state,
            "reason": self.reason,
            "delivery_id": self.delivery_id,
            "job_id": self.job_id,
            "event_type": self.event_type,
            "at": iso(self.created_at),
            "reviewed_at": iso(self.reviewed_at),
            "reviewed_by": self.reviewed_by,
            "review_note": self.review_note,
        }


class TransitionReviews:
    def __init__(self, db: Driver) -> None:
        self._db = db

    async def list_reviews(
        self,
        *,
        resolved: bool = False,
        tenant: str | None = None,
        source: str | None = None,
        before: int | None = None,
        limit: int = 50,
    ) -> list[TransitionReview]:
        """Rejected transitions, newest first, keyset-paginated by log id; only the
        unreviewed ones unless ``resolved``; only one tenant's or one source's when
        given."""
        found = await self._db.rows(
            _LIST,
            resolved=1 if resolved else 0,
            tenant=tenant,
            source=source,
            before=before,
            limit=limit,
        )
        return [TransitionReview.from_row(r, self._db.decode_time) for r in found]

    async def get_review(self, transition_id: int) -> TransitionReview | None:
        found = await self._db.row(_GET, id=transition_id)
        return TransitionReview.from_row(found, self._db.decode_time) if found else None

    async def resolve_review(self, transition_id: int, *, actor: str, note: str) -> bool:
        """Mark a rejected transition reviewed; False when it is not a rejected line or
        was already reviewed (the first verdict stands)."""
        return bool(await self._db.count(_RESOLVE, id=transition_id, actor=actor, note=note))
