"""The operators' aggregate reads: store gauges for /metrics, deliveries per minute and
dead-letter reasons for the admin, and the named reconciliation queries.

Every figure is a count, an age or a code, never a payload. Tables a later migration
adds (pause state, parked events, outbox) read as 0 until they exist.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from hookinbox.ids import delivery_id_floor
from hookinbox.store.operator_records import Anomalies, StoreGaugeReadings
from hookinbox.store.sql import DecodeTime, Sql, Tx, row, rows, value
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_statements("reads")
_TABLES = _SQL["tables"]
_QUEUE = _SQL["queue"]
_DEAD = _SQL["dead"]
_PAUSED = _SQL["paused"]
_PARKED = _SQL["parked"]
_UNSENT = _SQL["unsent"]
_PER_MINUTE = _SQL["per_minute"]
#: The most recent attempts the overview's failure series looks at: a scan of the
#: primary key's tail, bounded whatever the table holds (attempts have no time index).
FAILURE_SCAN = 100_000
_FAILED_PER_MINUTE = _SQL["failed_per_minute"]
_REASONS = _SQL["reasons"]

#: Check name -> (count statement, samples statement); ``:age`` in seconds, ``:limit``.
#: Samples give id, delivery_id, source, detail, since[, deliveries]. A check without a
#: count statement samples groups, each with its ``deliveries``, and its count is their
#: sum: its one statement reads the whole journal, which a count and then a sample
#: would read twice.
ANOMALY_CHECKS: dict[str, tuple[Sql | None, Sql]] = {
    check: (_SQL.get(f"count_{check}"), _SQL[f"sample_{check}"])
    for check in (
        "expired_leases",
        "stale_accepted",
        "failed_past_review",
        "deliveries_without_jobs",
        "unrecorded_effects",
        "unreviewed_transitions",
        "held_keys",
    )
}


def _gauges() -> Tx[StoreGaugeReadings]:
    tables = yield row(_TABLES, pause="source_state", parked="parked_events", outbox="outbox")
    queue = yield rows(_QUEUE)
    dead = yield rows(_DEAD)
    paused = (yield rows(_PAUSED)) if tables["pause"] else []
    parked = (yield rows(_PARKED)) if tables["parked"] else []
    unsent: dict[str, int] = {}
    failed: dict[str, int] = {}
    for r in (yield rows(_UNSENT)) if tables["outbox"] else []:
        (failed if r["failed"] else unsent)[r["source"]] = int(r["n"])
    return StoreGaugeReadings(
        queue_depth={r["source"]: int(r["depth"]) for r in queue},
        lag_seconds={r["source"]: max(0.0, float(r["lag"] or 0)) for r in queue},
        dead_letters={r["source"]: int(r["n"]) for r in dead},
        parked={r["source"]: int(r["n"]) for r in parked},
        outbox_unsent=unsent,
        outbox_failed=failed,
        paused_seconds={r["source"]: max(0.0, float(r["seconds"])) for r in paused},
    )


def _anomalies(check: str, age: float, limit: int, decode_time: DecodeTime) -> Tx[Anomalies]:
    count_sql, samples_sql = ANOMALY_CHECKS[check]
    found = int((yield value(count_sql, age=age))) if count_sql is not None else None
    samples: list[dict[str, Any]] = []
    if found != 0:
        for each in (yield rows(samples_sql, age=age, limit=limit)):
            sample = dict(each)
            sample["since"] = decode_time(sample["since"])
            samples.append(sample)
    if found is None:
        found = sum(int(sample["deliveries"]) for sample in samples)
    return Anomalies(found, samples)


class Reads:
    def __init__(self, db: Driver) -> None:
        self._db = db

    async def read_store_gauges(self) -> StoreGaugeReadings:
        """Per source: unfinished jobs, the age of the oldest due unclaimed job, dead
        letters, parked events, unsent outbox rows, and how long it has been paused."""
        return await self._db.run(_gauges(), atomic=False)

    async def deliveries_per_minute(self, since: datetime) -> list[tuple[str, int, int]]:
        """``(source, minute since the epoch, deliveries accepted)`` since a time."""
        found = await self._db.rows(_PER_MINUTE, floor=delivery_id_floor(since.timestamp()))
        return [(r["source"], int(r["minute"]), int(r["n"])) for r in found]

    async def failed_attempts_per_minute(self, since: datetime) -> list[tuple[int, int]]:
        """``(minute since the epoch, attempts that failed)`` since a time (retried,
        dead-lettered or lease lost), among the last FAILURE_SCAN attempts."""
        found = await self._db.rows(_FAILED_PER_MINUTE, since=since, scan=FAILURE_SCAN)
        return [(int(r["minute"]), int(r["n"])) for r in found]

    async def dead_letter_reasons(self) -> list[tuple[str, str, str, int]]:
        """``(source, action, last error code, failed jobs)``, largest group first."""
        found = await self._db.rows(_REASONS)
        return [(r["source"], r["action"], r["reason"], int(r["n"])) for r in found]

    async def find_anomalies(
        self, check: str, *, older_than_seconds: float = 0.0, limit: int = 20
    ) -> Anomalies:
        """Run one named reconciliation query (:data:`ANOMALY_CHECKS`):
        ``expired_leases``, ``stale_accepted``, ``failed_past_review``,
        ``deliveries_without_jobs`` (samples grouped by source and type, the count
        theirs, within ``limit`` groups),
        ``unrecorded_effects``, ``unreviewed_transitions``, ``held_keys``."""
        tx = _anomalies(check, float(older_than_seconds), limit, self._db.decode_time)
        return await self._db.run(tx, atomic=False)
