"""Webhook answers counted per minute, source and outcome, shared by every process.

Each process counts its answers in memory (:class:`hookinbox.metrics.ReceiptTally`) and
adds them here every few seconds, so the admin's "last hour" is the same in every
process and survives a restart. The rows are counts, one per (minute, source,
outcome): a flood of refused requests grows a count, never the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from hookinbox.store.sql import Tx, count, many
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

#: Minutes of counts kept: the overview's hour, with room for a late flush.
KEEP_MINUTES = 180

_SQL = load_statements("receipts")
_ADD = _SQL["add"]
_FORGET = _SQL["forget"]
_SINCE = _SQL["since"]


class ReceiptCounts:
    def __init__(self, db: Driver) -> None:
        self._db = db

    async def add_receipt_counts(self, counts: Mapping[tuple[int, str, str], int]) -> None:
        """Add ``{(minute since the epoch, source, outcome): count}`` in one transaction,
        and forget minutes older than :data:`KEEP_MINUTES` before the newest."""
        if not counts:
            return
        params = [
            {"minute": m, "source": s, "outcome": o, "answers": n}
            for (m, s, o), n in sorted(counts.items())
        ]
        oldest = max(m for m, _, _ in counts) - KEEP_MINUTES

        def tx() -> Tx[None]:
            yield many(_ADD, params)
            yield count(_FORGET, oldest=oldest)

        await self._db.run(tx())

    async def receipt_counts_since(self, first_minute: int) -> list[tuple[int, str, str, int]]:
        """``(minute, source, outcome, count)`` from ``first_minute`` on, oldest first."""
        found = await self._db.rows(_SINCE, first=first_minute)
        return [(int(r["minute"]), r["source"], r["outcome"], int(r["answers"])) for r in found]
