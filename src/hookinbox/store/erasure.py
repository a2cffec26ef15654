"""Erasure by data subject: a person's payloads, answer snippets and kept refusals' bodies.

Deliveries and kept refusals carry their subject's keyed hash (``subject_hash``, never
the value). An erasure finds them by it and takes out what holds the person's data, in
bounded batches of one short transaction each, and leaves the journal rows: ids, event
ids and body hashes keep deduplicating a provider's retries of an erased event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hookinbox.store.sql import Tx, count, rows
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_statements("erasure")
_COUNT_DELIVERIES = _SQL["count_deliveries"]
_COUNT_SNIPPETS = _SQL["count_snippets"]
_COUNT_REJECTED = _SQL["count_rejected"]
_BATCH = _SQL["batch"]
_DROP_PAYLOADS = _SQL["drop_payloads"]
_DROP_SNIPPETS = _SQL["drop_snippets"]
_MARK_ERASED = _SQL["mark_erased"]
_DROP_REJECTED_BODIES = _SQL["drop_rejected_bodies"]


@dataclass(frozen=True, slots=True)
class SubjectData:
    """What a subject's hash finds: its deliveries, and what of them holds data."""

    deliveries: int
    payloads: int
    snippets: int
    rejected_bodies: int

    def as_json(self) -> dict[str, Any]:
        return {
            "deliveries": self.deliveries,
            "payloads": self.payloads,
            "snippets": self.snippets,
            "rejected_bodies": self.rejected_bodies,
        }


@dataclass(frozen=True, slots=True)
class ErasedBatch:
    """One batch's work: deliveries visited, payloads deleted, snippets cleared."""

    deliveries: int
    payloads: int
    snippets: int


def _erase_batch(subject: str, source: str | None, limit: int) -> Tx[ErasedBatch]:
    ids = [r["id"] for r in (yield rows(_BATCH, subject=subject, source=source, limit=limit))]
    if not ids:
        return ErasedBatch(0, 0, 0)
    payloads = yield count(_DROP_PAYLOADS, ids=ids)
    snippets = yield count(_DROP_SNIPPETS, ids=ids)
    yield count(_MARK_ERASED, ids=ids)
    return ErasedBatch(len(ids), int(payloads or 0), int(snippets or 0))


class Erasure:
    def __init__(self, db: Driver) -> None:
        self._db = db

    async def find_subject(self, subject_hash: str, source: str | None = None) -> SubjectData:
        """Counts only: what an erasure of this subject (of one source) would take out."""
        found = await self._db.row(_COUNT_DELIVERIES, subject=subject_hash, source=source)
        assert found is not None
        snippets = await self._db.value(_COUNT_SNIPPETS, subject=subject_hash, source=source)
        rejected = await self._db.value(_COUNT_REJECTED, subject=subject_hash, source=source)
        return SubjectData(
            int(found["deliveries"]), int(found["payloads"]), int(snippets), int(rejected)
        )

    async def erase_delivery_batch(
        self, subject_hash: str, source: str | None, limit: int
    ) -> ErasedBatch:
        """Up to ``limit`` of the subject's deliveries with data left lose their payload
        and answer snippets, in one transaction; ``deliveries == 0`` when none is left."""
        return await self._db.run(_erase_batch(subject_hash, source, limit))

    async def erase_rejected_batch(self, subject_hash: str, source: str | None, limit: int) -> int:
        """Up to ``limit`` of the subject's kept refusals lose their body; how many."""
        return await self._db.count(
            _DROP_REJECTED_BODIES, subject=subject_hash, source=source, limit=limit
        )
