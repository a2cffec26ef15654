"""Sealed values at rest, a page at a time: counted per key id, and re-wrapped to the
current key (``hookinbox keys rotate``).

Rotation never pauses receiving: each page is read on its own, then its re-wrapped
values are written in one short transaction, each row only if it still holds the value
read (a row purged or re-sealed meanwhile is left alone). The sealed body itself is not
touched: only the 60-byte wrap of its data key changes (:meth:`Sealer.rewrap`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from hookinbox import sealing
from hookinbox.sealing import Sealer
from hookinbox.store.sql import Tx, count
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_statements("sealed_rows")

SealedTable = Literal["payloads", "rejected_deliveries", "attempts"]
#: The tables holding sealed values, and the column of each.
SEALED_TABLES: tuple[SealedTable, ...] = ("payloads", "rejected_deliveries", "attempts")
_PAGE = {
    "payloads": _SQL["payloads_page"],
    "rejected_deliveries": _SQL["rejected_page"],
    "attempts": _SQL["snippets_page"],
}
_REWRAP = {
    "payloads": _SQL["rewrap_payload"],
    "rejected_deliveries": _SQL["rewrap_rejected"],
    "attempts": _SQL["rewrap_snippet"],
}


@dataclass(frozen=True, slots=True)
class KeyCount:
    """Sealed values of one table under one key id."""

    table: str
    key_id: str
    rows: int

    def as_json(self) -> dict[str, Any]:
        return {"table": self.table, "key_id": self.key_id, "rows": self.rows}


@dataclass(slots=True)
class RewrapBatch:
    """What one page of a rotation did: rows seen sealed, re-wrapped (or, on a dry run,
    to re-wrap), and left because a row changed between the read and the write."""

    table: str
    seen: int = 0
    rewrapped: int = 0
    changed: int = 0
    #: The last primary key read: where the next page starts (None: the table is done).
    after: Any = None
    by_key: Counter[str] = field(default_factory=Counter)


def _write(sql_name: SealedTable, updates: list[dict[str, Any]]) -> Tx[int]:
    written = 0
    for params in updates:
        written += yield count(_REWRAP[sql_name], **params)
    return written


class SealedRows:
    def __init__(self, db: Driver, sealer: Sealer) -> None:
        self._db = db
        self._sealer = sealer

    async def rewrap_page(
        self, table: SealedTable, *, after: Any, limit: int, dry_run: bool = False
    ) -> RewrapBatch:
        """One page of ``table``'s sealed values after ``after`` (None: from the start),
        each not under the current key re-wrapped to it (counted only, on a dry run).
        KeyUnavailable when a value's key is not in the ring."""
        start = (0 if after is None else after) if table == "attempts" else after
        params: dict[str, Any] = {"after": start, "limit": limit}
        if table == "attempts":
            params["prefix"] = sealing.TEXT_PREFIX
        else:
            params["magic"] = sealing.MAGIC
        found = await self._db.rows(_PAGE[table], **params)
        batch = RewrapBatch(table, seen=len(found), after=found[-1]["pk"] if found else None)
        updates: list[dict[str, Any]] = []
        stale = 0
        for each in found:
            stored = each["sealed"]
            if table != "attempts":
                stored = bytes(stored)
            key_id = sealing.key_id_of(stored) or "?"
            batch.by_key[key_id] += 1
            if key_id == self._sealer.current_key_id:
                continue
            stale += 1
            if dry_run:
                continue
            if isinstance(stored, str):
                new: bytes | str | None = self._sealer.rewrap_text(stored)
            else:
                new = self._sealer.rewrap(stored)
            if new is not None:
                row = {"pk": each["pk"], "sealed": new, "old": stored}
                if table == "attempts":
                    row["job"] = each["job"]
                updates.append(row)
        if dry_run or not updates:
            batch.rewrapped = stale if dry_run else 0
            return batch
        written = await self._db.run(_write(table, updates))
        batch.rewrapped = written
        batch.changed = len(updates) - written
        return batch

    async def count_by_key(self, *, page: int = 1000) -> list[KeyCount]:
        """Sealed values per table and key id (a walk of every sealed value)."""
        counts: list[KeyCount] = []
        for table in SEALED_TABLES:
            totals: Counter[str] = Counter()
            after: Any = None
            while True:
                batch = await self.rewrap_page(table, after=after, limit=page, dry_run=True)
                totals.update(batch.by_key)
                if batch.seen < page:
                    break
                after = batch.after
            counts.extend(KeyCount(table, key, n) for key, n in sorted(totals.items()))
        return counts
