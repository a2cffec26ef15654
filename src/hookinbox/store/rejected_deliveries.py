"""Rejected deliveries: refusals for a signature or a timestamp, kept for a while so that
an operator can check them again after fixing a secret (``hookinbox rejected retry``).

Bounded by construction, whatever a sender does: one row per (source, body) -- a
provider's repeats of one delivery, or a forger's of one body, update it (``seen``, the
latest headers) -- and after every write the source's rows are cut to a ring of at most
``max_rows`` rows and ``max_bytes`` bytes, the least recently seen going first. Rows older
than the retention are purged in batches. (The receiver also rate-limits writes before
they reach the store: :mod:`hookinbox.receive.rejected_keeper`.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hookinbox import sealing
from hookinbox.sealing import Sealer
from hookinbox.store.records import Record, iso
from hookinbox.store.sql import DecodeTime, Row, Tx, count, row
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver


@dataclass(frozen=True, slots=True)
class NewRejected:
    """A refused delivery to keep: headers already stripped of credentials and bounded,
    ``body`` None when it was larger than the cap."""

    id: str
    source: str
    reason: str
    body_sha256: str
    body: bytes | None
    body_bytes: int
    headers: dict[str, str]
    #: The keyed hash of the body's data subject, when the body parsed (never the value).
    subject_hash: str | None = None


@dataclass(frozen=True, slots=True)
class RejectedDelivery(Record):
    id: str
    source: str
    reason: str
    body_sha256: str
    body_bytes: int
    body_kept: bool
    first_seen_at: datetime
    last_seen_at: datetime
    seen: int
    retried_at: datetime | None
    retry_outcome: str | None
    retry_delivery_id: str | None
    headers: dict[str, str]
    #: The raw body, when read with it (``get``) and kept.
    body: bytes | None = None

    @classmethod
    def read(
        cls, found: Row, decode_time: DecodeTime, *, with_body: bool = False
    ) -> RejectedDelivery:
        body = found["body"] if with_body else None
        return cls.from_row(
            found,
            decode_time,
            headers=json.loads(found["headers"]),
            body=bytes(body) if body is not None else None,
        )

    def as_json(self) -> dict[str, Any]:
        """Ids, codes, sizes, times and header names: never the body or header values."""
        return {
            "id": self.id,
            "source": self.source,
            "reason": self.reason,
            "body_sha256": self.body_sha256,
            "body_bytes": self.body_bytes,
            "body_kept": self.body_kept,
            "header_names": sorted(self.headers),
            "first_seen_at": iso(self.first_seen_at),
            "last_seen_at": iso(self.last_seen_at),
            "seen": self.seen,
            "retried_at": iso(self.retried_at),
            "retry_outcome": self.retry_outcome,
            "retry_delivery_id": self.retry_delivery_id,
        }


_SQL = load_statements("rejected_deliveries")
_KEEP = _SQL["keep"]
# Writes of one source take turns (else two concurrent trims, each not seeing the other's
# new row, could leave the ring one row over its bound).
_RING_LOCK = _SQL["ring_lock"]
# The ring: the source's rows newest first; past max_rows, or past max_bytes in total.
_TRIM = _SQL["trim"]
_LIST = _SQL["list"]
_OLDEST = _SQL["oldest_unsettled"]
_GET = _SQL["get"]
_MARK = _SQL["mark"]
_COUNT_OLD = _SQL["count_old"]
_PURGE = _SQL["purge"]
_TOTALS = _SQL["totals"]


def _keep(item: NewRejected, max_rows: int, max_bytes: int) -> Tx[str | None]:
    headers = json.dumps(item.headers, separators=(",", ":"))
    stored = len(item.body or b"") + len(headers)
    yield row(_RING_LOCK, ring="rejected:" + item.source)
    kept = yield row(
        _KEEP,
        id=item.id,
        source=item.source,
        reason=item.reason,
        sha=item.body_sha256,
        body=item.body,
        body_bytes=item.body_bytes,
        stored=stored,
        headers=headers,
        subject_hash=item.subject_hash,
    )
    yield count(_TRIM, source=item.source, max_rows=max_rows, max_bytes=max_bytes)
    return str(kept["id"]) if kept is not None else None


class RejectedDeliveries:
    def __init__(self, db: Driver, sealer: Sealer) -> None:
        self._db = db
        self._sealer = sealer

    async def keep_rejected(
        self, item: NewRejected, *, max_rows: int, max_bytes: int
    ) -> str | None:
        """Keep (or, for a body already kept for the source, update) one refused delivery,
        then cut the source's rows to the ring; the row's id. A sealed source's body is
        sealed for its (source, body hash), which a repeat's update keeps."""
        if item.body is not None and self._sealer.seals(item.source):
            aad = sealing.rejected_aad(item.source, item.body_sha256)
            item = replace(item, body=self._sealer.seal_always(item.body, aad))
        return await self._db.run(_keep(item, max_rows, max_bytes))

    async def list_rejected(
        self,
        *,
        source: str | None = None,
        include_settled: bool = False,
        before: str | None = None,
        limit: int = 50,
    ) -> list[RejectedDelivery]:
        """Newest first (by first seen); without ``include_settled``, only those not yet
        accepted by a retry."""
        found = await self._db.rows(
            _LIST, source=source, everything=include_settled, before=before, limit=limit
        )
        return [RejectedDelivery.read(r, self._db.decode_time) for r in found]

    async def oldest_unsettled_rejected(
        self, *, source: str | None = None, limit: int
    ) -> list[RejectedDelivery]:
        """Not yet accepted by a retry, oldest first (by first seen): a bulk retry catches
        up in the order the provider sent them."""
        found = await self._db.rows(_OLDEST, source=source, limit=limit)
        return [RejectedDelivery.read(r, self._db.decode_time) for r in found]

    async def get_rejected(self, rejected_id: str) -> RejectedDelivery | None:
        """One rejected delivery with its body (None once purged or never kept)."""
        found = await self._db.row(_GET, id=rejected_id)
        if found is None:
            return None
        kept = RejectedDelivery.read(found, self._db.decode_time, with_body=True)
        if kept.body is None:
            return kept
        aad = sealing.rejected_aad(kept.source, kept.body_sha256)
        return replace(kept, body=self._sealer.open(kept.body, aad))

    async def mark_rejected_retried(
        self, rejected_id: str, outcome: str, delivery_id: str | None
    ) -> None:
        await self._db.count(_MARK, id=rejected_id, outcome=outcome, delivery_id=delivery_id)

    async def count_purgeable_rejected(self, older_than_seconds: float) -> int:
        return int(await self._db.value(_COUNT_OLD, age=float(older_than_seconds)))

    async def purge_rejected(self, older_than_seconds: float, limit: int) -> int:
        """Delete up to ``limit`` rejected deliveries last seen before the cutoff."""
        return await self._db.count(_PURGE, age=float(older_than_seconds), limit=limit)

    async def rejected_totals(self) -> list[dict[str, Any]]:
        """Per source and reason: rows kept, refusals seen, bytes kept."""
        return [
            {
                "source": r["source"],
                "reason": r["reason"],
                "rows": int(r["rows_kept"]),
                "seen": int(r["seen"]),
                "stored_bytes": int(r["stored_bytes"]),
            }
            for r in await self._db.rows(_TOTALS)
        ]
