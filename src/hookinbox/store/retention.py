"""Retention: payloads go once their delivery's jobs all completed (plus a window), journal
rows once the key retention has passed; dead letters and unfinished work never go.

Purges work in bounded batches, one short transaction each (PostgreSQL skips rows a
worker holds), so a large purge never delays the receiver's commits.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from hookinbox.ids import delivery_id_after, delivery_id_floor
from hookinbox.store.dialect import POSTGRES
from hookinbox.store.sql import Sql, Tx, count, rows
from hookinbox.store.statements import load_postgres_statements, load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_statements("retention")
_COUNT_PAYLOADS = _SQL["count_payloads"]
_PAYLOAD_BATCH = _SQL["payload_batch"]
_DROP_PAYLOADS = _SQL["drop_payloads"]
_MARK_PURGED = _SQL["mark_purged"]
_COUNT_DELIVERIES = _SQL["count_deliveries"]
_DELIVERY_BATCH = _SQL["delivery_batch"]
_LOCK_BATCH_JOBS = _SQL["lock_batch_jobs"]
_DROP_EFFECTS = _SQL["drop_effects"]
_DROP_SUPERSEDED = _SQL["drop_superseded"]
_DROP_DELIVERIES = _SQL["drop_deliveries"]
_PARTITIONED = load_postgres_statements("partitions")
_OVERDUE_COUNT = _PARTITIONED["count_overdue_payloads"]
_OVERDUE_BATCH = _PARTITIONED["overdue_payload_batch"]
#: A payload partition's span (a UTC day), in seconds.
PARTITION_SPAN = 86400.0


def _purge(batch: Sql, drops: tuple[Sql, ...], age: float, limit: int, **more: object) -> Tx[int]:
    ids = [each["id"] for each in (yield rows(batch, age=age, limit=limit, **more))]
    if ids:
        for drop in drops:
            yield count(drop, ids=ids)
    return len(ids)


#: How many times a journal batch reads its rows when a replay made every row it read
#: unfinished meanwhile. A batch that deletes nothing ends the purge run, so one whose
#: rows were all replayed reads the next ones (the replayed rows are no longer
#: candidates); bounded, so that a stream of replays cannot keep one batch going.
_BATCH_READS = 3


def _jobs_span(delivery_ids: list[str]) -> dict[str, str]:
    """The range of the job ids of these journal rows: from the smallest delivery id to
    the first id of the millisecond after the largest (a job's id is its delivery's,
    ':', its action)."""
    return {"lo": min(delivery_ids), "hi": delivery_id_after(max(delivery_ids))}


def _purge_journal(age: float, limit: int, ceiling: str) -> Tx[int]:
    """A journal batch: its rows, then their jobs locked (``lock_batch_jobs``), then the
    rows whose jobs are all still completed deleted with everything that is theirs."""
    for _ in range(_BATCH_READS):
        found = yield rows(_DELIVERY_BATCH, age=age, limit=limit, ceiling=ceiling)
        if not found:
            return 0
        ids = [each["id"] for each in found]
        span = _jobs_span(ids)
        jobs = yield rows(_LOCK_BATCH_JOBS, ids=ids, **span)
        unfinished = {job["delivery_id"] for job in jobs if job["state"] != "completed"}
        ids = [delivery_id for delivery_id in ids if delivery_id not in unfinished]
        if ids:
            for drop in (_DROP_EFFECTS, _DROP_SUPERSEDED):
                yield count(drop, ids=ids, **span)
            yield count(_DROP_DELIVERIES, ids=ids)
            return len(ids)
    return 0


#: How far a receiver's clock (which makes delivery ids) may run ahead of the database's
#: (which stamps last_seen_at) before a journal row is purged later than its retention.
CLOCK_ALLOWANCE = 3600.0


def _journal_ceiling(age: float) -> str:
    """The id above which no journal row can have been last seen ``age`` seconds ago."""
    return delivery_id_floor(time.time() - age + CLOCK_ALLOWANCE)


class Retention:
    def __init__(self, db: Driver) -> None:
        self._db = db
        self._partitioned = db.dialect is POSTGRES

    def _payload_statements(self, age: float) -> tuple[Sql, Sql, dict[str, object]]:
        """PostgreSQL's payloads retire by the day (store/partitions.py): with a retention
        of a day or more, the row-by-row path is left the payloads below the ids of the
        day before the retirement cutoff: DEFAULT's (held past their day) and a day's that
        could not retire for a day, which makes a purge of the rest delete-free. A shorter
        retention is kept by rows, as on SQLite: a day's wait would double it."""
        if self._partitioned and age >= PARTITION_SPAN:
            ceiling = delivery_id_floor(time.time() - age - PARTITION_SPAN)
            return _OVERDUE_COUNT, _OVERDUE_BATCH, {"ceiling": ceiling}
        return _COUNT_PAYLOADS, _PAYLOAD_BATCH, {}

    async def count_purgeable_payloads(self, older_than_seconds: float) -> int:
        """Payloads of deliveries whose jobs all completed more than this long ago (or
        that had no job and were first seen that long ago); on PostgreSQL with a
        retention of a day or more, only those the day partitions' retirement leaves
        (see :meth:`_payload_statements`)."""
        age = float(older_than_seconds)
        statement, _, more = self._payload_statements(age)
        return int(await self._db.value(statement, age=age, **more))

    async def purge_payloads(self, older_than_seconds: float, limit: int) -> int:
        """Delete up to ``limit`` of those payloads in one transaction; return how many."""
        age = float(older_than_seconds)
        drops = (_DROP_PAYLOADS, _MARK_PURGED)
        _, batch, more = self._payload_statements(age)
        return await self._db.run(_purge(batch, drops, age, limit, **more))

    async def count_purgeable_deliveries(self, older_than_seconds: float) -> tuple[int, int]:
        """``(purgeable, held)``: journal rows last seen more than this long ago whose jobs
        all completed, and those as old but kept because a job is unfinished or failed."""
        age = float(older_than_seconds)
        ceiling = _journal_ceiling(age)
        found = await self._db.row(
            _COUNT_DELIVERIES, age=age, ceiling=ceiling, jobs_ceiling=delivery_id_after(ceiling)
        )
        assert found is not None
        held = int(found["held"])
        return int(found["old"]) - held, held

    async def purge_deliveries(self, older_than_seconds: float, limit: int) -> int:
        """Delete up to ``limit`` purgeable journal rows with their jobs, attempts, payloads
        and ledger rows, in one transaction; return how many deliveries went."""
        age = float(older_than_seconds)
        return await self._db.run(_purge_journal(age, limit, _journal_ceiling(age)))
