"""Retention: payloads go once their delivery's jobs all completed (plus a window), journal
rows once the key retention has passed; dead letters and unfinished work never go.

Purges work in bounded batches, one short transaction each (PostgreSQL skips rows a
worker holds), so a large purge never delays the receiver's commits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hookinbox.store.sql import Sql, Tx, count, rows
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_statements("retention")
_COUNT_PAYLOADS = _SQL["count_payloads"]
_PAYLOAD_BATCH = _SQL["payload_batch"]
_DROP_PAYLOADS = _SQL["drop_payloads"]
_MARK_PURGED = _SQL["mark_purged"]
_COUNT_DELIVERIES = _SQL["count_deliveries"]
_DELIVERY_BATCH = _SQL["delivery_batch"]
_DROP_EFFECTS = _SQL["drop_effects"]
_DROP_SUPERSEDED = _SQL["drop_superseded"]
_DROP_DELIVERIES = _SQL["drop_deliveries"]


def _purge(batch: Sql, drops: tuple[Sql, ...], age: float, limit: int) -> Tx[int]:
    ids = [each["id"] for each in (yield rows(batch, age=age, limit=limit))]
    if ids:
        for drop in drops:
            yield count(drop, ids=ids)
    return len(ids)


class Retention:
    def __init__(self, db: Driver) -> None:
        self._db = db

    async def count_purgeable_payloads(self, older_than_seconds: float) -> int:
        """Payloads of deliveries whose jobs all completed more than this long ago (or
        that had no job and were first seen that long ago)."""
        return int(await self._db.value(_COUNT_PAYLOADS, age=float(older_than_seconds)))

    async def purge_payloads(self, older_than_seconds: float, limit: int) -> int:
        """Delete up to ``limit`` of those payloads in one transaction; return how many."""
        drops = (_DROP_PAYLOADS, _MARK_PURGED)
        return await self._db.run(_purge(_PAYLOAD_BATCH, drops, float(older_than_seconds), limit))

    async def count_purgeable_deliveries(self, older_than_seconds: float) -> tuple[int, int]:
        """``(purgeable, held)``: journal rows last seen more than this long ago whose jobs
        all completed, and those as old but kept because a job is unfinished or failed."""
        found = await self._db.row(_COUNT_DELIVERIES, age=float(older_than_seconds))
        assert found is not None
        return int(found["purgeable"]), int(found["held"])

    async def purge_deliveries(self, older_than_seconds: float, limit: int) -> int:
        """Delete up to ``limit`` purgeable journal rows with their jobs, attempts, payloads
        and ledger rows, in one transaction; return how many deliveries went."""
        drops = (_DROP_EFFECTS, _DROP_SUPERSEDED, _DROP_DELIVERIES)
        return await self._db.run(_purge(_DELIVERY_BATCH, drops, float(older_than_seconds), limit))
