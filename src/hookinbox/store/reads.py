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

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_TABLES = Sql(
    "SELECT {table_exists:pause} AS pause, {table_exists:parked} AS parked,"
    " {table_exists:outbox} AS outbox"
)
_QUEUE = Sql(
    "SELECT source, count(*) AS depth,"
    " max(CASE WHEN state = 'accepted' AND next_attempt_at <= {now}"
    " THEN {age:next_attempt_at} ELSE 0 END) AS lag"
    " FROM jobs WHERE state IN ('accepted', 'processing') GROUP BY source"
)
_DEAD = Sql("SELECT source, count(*) AS n FROM jobs WHERE state = 'failed' GROUP BY source")
_PAUSED = Sql("SELECT source, {age:changed_at} AS seconds FROM source_state WHERE paused = TRUE")
_PARKED = Sql("SELECT source, count(*) AS n FROM parked_events GROUP BY source")
_UNSENT = Sql(
    "SELECT coalesce(source, '_none') AS source, state = 'failed' AS failed, count(*) AS n"
    " FROM outbox WHERE state <> 'sent' GROUP BY 1, 2"
)
_PER_MINUTE = Sql(
    "SELECT source, {minute:first_seen_at} AS minute, count(*) AS n"
    " FROM deliveries WHERE id >= :floor GROUP BY 1, 2 ORDER BY 2"
)
#: The most recent attempts the overview's failure series looks at: a scan of the
#: primary key's tail, bounded whatever the table holds (attempts have no time index).
FAILURE_SCAN = 100_000
_FAILED_PER_MINUTE = Sql(
    "SELECT {minute:ended_at} AS minute, count(*) AS n FROM attempts"
    " WHERE id > (SELECT coalesce(max(id), 0) FROM attempts) - :scan"
    " AND ended_at >= :since AND outcome IN ('retry', 'failed', 'lease_expired')"
    " GROUP BY 1 ORDER BY 1"
)
_REASONS = Sql(
    "SELECT source, action, coalesce(last_error, '') AS reason, count(*) AS n"
    " FROM jobs WHERE state = 'failed' GROUP BY 1, 2, 3 ORDER BY n DESC, reason"
)

_OLDER = "< {now} - {secs:age}"
_EXPIRED = "FROM jobs WHERE state = 'processing' AND lease_expires_at < {now}"
_STALE = "FROM jobs WHERE state = 'accepted' AND created_at " + _OLDER
_PAST_REVIEW = "FROM jobs WHERE state = 'failed' AND failed_at " + _OLDER
_UNREVIEWED = (
    "FROM resource_transitions t JOIN resources r ON r.id = t.resource_id"
    " WHERE t.outcome = 'rejected' AND t.reviewed_at IS NULL AND t.created_at " + _OLDER
)
_JOBLESS = "FROM deliveries d WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id)"
_UNRECORDED = (
    "FROM effects e LEFT JOIN jobs j ON j.id = e.job_id WHERE e.state = 'started'"
    " AND e.created_at " + _OLDER + " AND (j.state IS NULL OR j.state <> 'processing')"
)

#: check name -> (count statement, samples statement); ``:age`` in seconds, ``:limit``.
#: Samples give id, delivery_id, source, detail, since[, deliveries].
ANOMALY_CHECKS: dict[str, tuple[Sql, Sql]] = {
    "expired_leases": (
        Sql("SELECT count(*) " + _EXPIRED),
        Sql(
            "SELECT id, delivery_id, source, 'leased by ' || coalesce(leased_by, '?')"
            " || ', attempt ' || attempts || '/' || max_attempts AS detail,"
            " lease_expires_at AS since " + _EXPIRED + " ORDER BY lease_expires_at LIMIT :limit"
        ),
    ),
    "stale_accepted": (
        Sql("SELECT count(*) " + _STALE),
        Sql(
            "SELECT id, delivery_id, source, coalesce(last_error, 'never ran') AS detail,"
            " created_at AS since " + _STALE + " ORDER BY created_at LIMIT :limit"
        ),
    ),
    "failed_past_review": (
        Sql("SELECT count(*) " + _PAST_REVIEW),
        Sql(
            "SELECT id, delivery_id, source, coalesce(last_error, '') AS detail,"
            " failed_at AS since " + _PAST_REVIEW + " ORDER BY failed_at LIMIT :limit"
        ),
    ),
    "deliveries_without_jobs": (
        Sql("SELECT count(*) " + _JOBLESS),
        Sql(
            "SELECT min(d.id) AS id, min(d.id) AS delivery_id, d.source, d.event_type AS detail,"
            " min(d.first_seen_at) AS since, count(*) AS deliveries "
            + _JOBLESS
            + " GROUP BY d.source, d.event_type ORDER BY d.source, d.event_type LIMIT :limit"
        ),
    ),
    "unrecorded_effects": (
        Sql("SELECT count(*) " + _UNRECORDED),
        Sql(
            "SELECT e.key AS id, j.delivery_id, j.source,"
            " 'job ' || coalesce(e.job_id, '?') || ' is ' || coalesce(j.state, 'gone') AS detail,"
            " e.created_at AS since " + _UNRECORDED + " ORDER BY e.created_at LIMIT :limit"
        ),
    ),
    "unreviewed_transitions": (
        Sql("SELECT count(*) " + _UNREVIEWED),
        Sql(
            "SELECT 'transition ' || CAST(t.id AS text) AS id, t.delivery_id, r.kind AS source,"
            " t.resource_id || ' ' || coalesce(t.from_state, '?') || ' -> '"
            " || coalesce(t.to_state, '?') || ' (' || coalesce(t.reason, '?') || ')' AS detail,"
            " t.created_at AS since " + _UNREVIEWED + " ORDER BY t.id LIMIT :limit"
        ),
    ),
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
    found = int((yield value(count_sql, age=age)))
    samples: list[dict[str, Any]] = []
    if found:
        for each in (yield rows(samples_sql, age=age, limit=limit)):
            sample = dict(each)
            sample["since"] = decode_time(sample["since"])
            samples.append(sample)
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
        ``deliveries_without_jobs`` (samples grouped by source and type),
        ``unrecorded_effects``, ``unreviewed_transitions``."""
        tx = _anomalies(check, float(older_than_seconds), limit, self._db.decode_time)
        return await self._db.run(tx, atomic=False)
