"""Retention: payloads go once their delivery's jobs all completed (plus a window), journal
rows once the key retention has passed; dead letters and unfinished work never go.

Purges work in bounded batches, one short transaction each (PostgreSQL skips rows a
worker holds), so a large purge never delays the receiver's commits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hookinbox.store.sql import Sql, Tx, count, rows

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_CUTOFF = "{now} - {secs:age}"
# deliveries.id is COLLATE "C" on PostgreSQL, the columns pointing at it are plain text:
# each lookup names the collation of the index it should walk (deliveries_pkey: "C";
# jobs_delivery_idx: "default"). Without it PostgreSQL hashes all of deliveries, payloads
# and jobs for every batch: 4 s per batch of 1,000 at 5 million rows, 0.2 s with it
# (docs/performance.md, "Cost growth").
_JOBS_OF_D = "SELECT 1 FROM jobs j WHERE j.delivery_id = d.id {collate:default}"
# A payload may go once every job of its delivery completed before the cutoff (a delivery
# no route matched has nothing to wait for). Failed and unfinished deliveries keep theirs:
# a dead-letter retry needs the body. The walk goes over payloads (oldest first) and
# looks each delivery up: the journal holds many more rows than payloads once a purge
# has run, and SQLite would otherwise scan the journal from its oldest row every batch.
_PAYLOAD_PURGEABLE = (
    "FROM payloads p WHERE (SELECT d.first_seen_at FROM deliveries d"
    f" WHERE d.id = p.delivery_id {{collate:C}}) < {_CUTOFF}"
    " AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = p.delivery_id"
    f" AND (j.state <> 'completed' OR j.completed_at >= {_CUTOFF}))"
)
_COUNT_PAYLOADS = Sql("SELECT count(*) " + _PAYLOAD_PURGEABLE)
_PAYLOAD_BATCH = Sql(
    "SELECT p.delivery_id AS id " + _PAYLOAD_PURGEABLE + " LIMIT :limit {skip_locked:p}"
)
_DROP_PAYLOADS = Sql("DELETE FROM payloads WHERE delivery_id {in:ids}")
_MARK_PURGED = Sql("UPDATE deliveries SET payload_purged_at = {now} WHERE id {in:ids}")

# A journal row may go once it was last seen before the cutoff and all its jobs completed.
_UNFINISHED = f"EXISTS ({_JOBS_OF_D} AND j.state <> 'completed')"
_HELD = f"coalesce(sum(CASE WHEN {_UNFINISHED} THEN 1 ELSE 0 END), 0)"
_OLD = f"FROM deliveries d WHERE d.last_seen_at < {_CUTOFF}"
_COUNT_DELIVERIES = Sql(f"SELECT count(*) - {_HELD} AS purgeable, {_HELD} AS held {_OLD}")
_DELIVERY_BATCH = Sql(f"SELECT d.id {_OLD} AND NOT {_UNFINISHED} LIMIT :limit " + "{skip_locked:d}")
_OF_BATCH = "WHERE job_id IN (SELECT id FROM jobs WHERE delivery_id {in:ids})"
_DROP_EFFECTS = Sql("DELETE FROM effects " + _OF_BATCH)
_DROP_SUPERSEDED = Sql("DELETE FROM effects_superseded " + _OF_BATCH)
# Jobs, attempts and the payload go with the journal row (ON DELETE CASCADE).
_DROP_DELIVERIES = Sql("DELETE FROM deliveries WHERE id {in:ids}")


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
