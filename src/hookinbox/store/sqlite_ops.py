"""SQLite statements for the operator commands, as a mixin of :class:`SQLiteStore`.

Same rules as the rest of the store: one thread owns the connection (``self._db.run``),
writes take ``BEGIN IMMEDIATE``, times are unix seconds from SQLite's clock. Every
statement is a constant here; callers choose among them by name, never by building SQL.
Purges work in bounded batches, one short transaction each, so a large purge never holds
the writer lock long enough to delay the receiver's commits.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hookinbox.store.base import DeliveryView, EffectRecord, JobState
from hookinbox.store.ops_records import Anomalies, JobDetail, OperatorAction, SourceState
from hookinbox.store.sqlite_clock import NOW

if TYPE_CHECKING:
    import asyncio

    from hookinbox.store.sqlite import _DatabaseThread


_JOB_DETAIL = """
SELECT j.id, j.delivery_id, j.source, j.action, j.state, j.attempts, j.max_attempts,
       j.last_error, j.trigger, d.event_id, d.event_type, j.business_id,
       EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = j.delivery_id)
           AS payload_retained,
       j.created_at, j.updated_at, j.completed_at, j.failed_at,
       (SELECT min(a.ended_at) FROM attempts a
        WHERE a.job_id = j.id AND a.outcome <> 'completed') AS first_failed_at,
       j.lease_expires_at
FROM jobs j JOIN deliveries d ON d.id = j.delivery_id
"""

_FAILED_WHERE = """
WHERE j.state = 'failed' AND (:source IS NULL OR j.source = :source)
  AND (:since IS NULL OR j.failed_at >= :since)
"""
_LIST_FAILED_NEWEST = (
    _JOB_DETAIL + _FAILED_WHERE + "ORDER BY j.failed_at DESC, j.id DESC LIMIT :limit"
)
_LIST_FAILED_OLDEST = _JOB_DETAIL + _FAILED_WHERE + "ORDER BY j.failed_at, j.id LIMIT :limit"

_REQUEUE = f"""
UPDATE jobs
SET state = 'accepted', attempts = 0, max_attempts = :max_attempts, next_attempt_at = {NOW},
    trigger = :trigger, last_error = NULL, completed_at = NULL, failed_at = NULL,
    lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = {NOW}
WHERE id = :id AND state IN (SELECT value FROM json_each(:states))
RETURNING id, source, delivery_id
"""

_AUDIT = f"""
INSERT INTO operator_actions (at, actor, command, source, delivery_id, job_id, detail)
VALUES ({NOW}, :actor, :command, :source, :delivery_id, :job_id, :detail)
"""

_SUPERSEDE = f"""
INSERT INTO effects_superseded
    (key, job_id, state, result, created_at, recorded_at, superseded_at, superseded_by)
SELECT key, job_id, state, result, created_at, recorded_at, {NOW}, :actor
FROM effects WHERE job_id = :job_id
"""

_SET_PAUSED = f"""
INSERT INTO source_state (source, paused, reason, changed_at, changed_by)
VALUES (:source, :paused, :reason, {NOW}, :actor)
ON CONFLICT (source) DO UPDATE SET paused = excluded.paused, reason = excluded.reason,
    changed_at = excluded.changed_at, changed_by = excluded.changed_by
RETURNING source, paused, reason, changed_at, changed_by
"""

# A payload may go once every job of its delivery completed before the cutoff (a delivery
# no route matched has nothing to wait for). Failed and unfinished deliveries keep theirs:
# a dead-letter retry needs the body.
_PAYLOAD_PURGEABLE = f"""
FROM payloads p JOIN deliveries d ON d.id = p.delivery_id
WHERE d.first_seen_at < {NOW} - :age
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                  AND (j.state <> 'completed' OR j.completed_at >= {NOW} - :age))
"""

# A journal row may go once it was last seen before the cutoff and all its jobs completed:
# dead letters and unfinished work are never dropped by a purge.
_UNFINISHED = "EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id AND j.state <> 'completed')"
_DELIVERY_OLD = f"FROM deliveries d WHERE d.last_seen_at < {NOW} - :age"

#: check name -> (count statement, samples statement); samples give
#: id, delivery_id, source, detail, since[, deliveries].
ANOMALY_CHECKS: dict[str, tuple[str, str]] = {
    "expired_leases": (
        f"SELECT count(*) FROM jobs WHERE state = 'processing' AND lease_expires_at < {NOW}",
        "SELECT id, delivery_id, source, 'leased by ' || coalesce(leased_by, '?') || ', attempt '"
        " || attempts || '/' || max_attempts AS detail, lease_expires_at AS since FROM jobs"
        f" WHERE state = 'processing' AND lease_expires_at < {NOW}"
        " ORDER BY lease_expires_at LIMIT :limit",
    ),
    "stale_accepted": (
        f"SELECT count(*) FROM jobs WHERE state = 'accepted' AND created_at < {NOW} - :age",
        "SELECT id, delivery_id, source, coalesce(last_error, 'never ran') AS detail,"
        " created_at AS since FROM jobs"
        f" WHERE state = 'accepted' AND created_at < {NOW} - :age"
        " ORDER BY created_at LIMIT :limit",
    ),
    "failed_past_review": (
        f"SELECT count(*) FROM jobs WHERE state = 'failed' AND failed_at < {NOW} - :age",
        "SELECT id, delivery_id, source, coalesce(last_error, '') AS detail,"
        " failed_at AS since FROM jobs"
        f" WHERE state = 'failed' AND failed_at < {NOW} - :age ORDER BY failed_at LIMIT :limit",
    ),
    "deliveries_without_jobs": (
        "SELECT count(*) FROM deliveries d"
        " WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id)",
        "SELECT min(d.id) AS id, min(d.id) AS delivery_id, d.source, d.event_type AS detail,"
        " min(d.first_seen_at) AS since, count(*) AS deliveries FROM deliveries d"
        " WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id)"
        " GROUP BY d.source, d.event_type ORDER BY d.source, d.event_type LIMIT :limit",
    ),
    "unrecorded_effects": (
        "SELECT count(*) FROM effects e LEFT JOIN jobs j ON j.id = e.job_id"
        f" WHERE e.state = 'started' AND e.created_at < {NOW} - :age"
        " AND (j.state IS NULL OR j.state <> 'processing')",
        "SELECT e.key AS id, j.delivery_id, j.source,"
        " 'job ' || coalesce(e.job_id, '?') || ' is ' || coalesce(j.state, 'gone') AS detail,"
        " e.created_at AS since FROM effects e LEFT JOIN jobs j ON j.id = e.job_id"
        f" WHERE e.state = 'started' AND e.created_at < {NOW} - :age"
        " AND (j.state IS NULL OR j.state <> 'processing') ORDER BY e.created_at LIMIT :limit",
    ),
}


def _time(value: float | None) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if value is not None else None


def _at(value: float) -> datetime:
    moment = _time(value)
    assert moment is not None
    return moment


def _job_detail(row: sqlite3.Row) -> JobDetail:
    return JobDetail(
        id=row["id"],
        delivery_id=row["delivery_id"],
        source=row["source"],
        action=row["action"],
        state=row["state"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        last_error=row["last_error"],
        trigger=row["trigger"],
        event_id=row["event_id"],
        event_type=row["event_type"],
        business_id=row["business_id"],
        payload_retained=bool(row["payload_retained"]),
        created_at=_at(row["created_at"]),
        updated_at=_at(row["updated_at"]),
        completed_at=_time(row["completed_at"]),
        failed_at=_time(row["failed_at"]),
        first_failed_at=_time(row["first_failed_at"]),
        lease_expires_at=_time(row["lease_expires_at"]),
    )


def _source_state(row: sqlite3.Row) -> SourceState:
    return SourceState(
        source=row["source"],
        paused=bool(row["paused"]),
        reason=row["reason"],
        changed_at=_time(row["changed_at"]),
        changed_by=row["changed_by"],
    )


def _in_list(values: Sequence[str]) -> str:
    """The values as one JSON parameter, read back with ``json_each``: no SQL is built."""
    return json.dumps(list(values))


class SQLiteOperatorsMixin:
    """Operator statements; mixed into :class:`~hookinbox.store.sqlite.SQLiteStore`."""

    if TYPE_CHECKING:
        _db: _DatabaseThread
        _wakeup: asyncio.Event | None

        async def get_delivery(
            self, ref: str, source: str | None = None
        ) -> DeliveryView | None: ...

    async def get_job(self, job_id: str) -> JobDetail | None:
        def run(conn: sqlite3.Connection) -> JobDetail | None:
            row = conn.execute(_JOB_DETAIL + " WHERE j.id = ?", (job_id,)).fetchone()
            return _job_detail(row) if row is not None else None

        return await self._db.run(run)

    async def list_failed_jobs(
        self,
        *,
        source: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
        oldest_first: bool = False,
    ) -> list[JobDetail]:
        statement = _LIST_FAILED_OLDEST if oldest_first else _LIST_FAILED_NEWEST
        params = {
            "source": source,
            "since": since.timestamp() if since is not None else None,
            "limit": limit,
        }

        def run(conn: sqlite3.Connection) -> list[JobDetail]:
            return [_job_detail(row) for row in conn.execute(statement, params).fetchall()]

        return await self._db.run(run)

    async def requeue_jobs(
        self,
        job_ids: Sequence[str],
        *,
        from_states: Sequence[JobState],
        trigger: str,
        max_attempts: int,
        actor: str,
        command: str,
    ) -> list[str]:
        states = _in_list(from_states)

        def run(conn: sqlite3.Connection) -> list[str]:
            moved = []
            conn.execute("BEGIN IMMEDIATE")
            for job_id in job_ids:
                row = conn.execute(
                    _REQUEUE,
                    {
                        "id": job_id,
                        "states": states,
                        "trigger": trigger,
                        "max_attempts": max_attempts,
                    },
                ).fetchone()
                if row is None:
                    continue
                conn.execute(
                    _AUDIT,
                    {
                        "actor": actor,
                        "command": command,
                        "source": row["source"],
                        "delivery_id": row["delivery_id"],
                        "job_id": row["id"],
                        "detail": f"trigger={trigger}",
                    },
                )
                moved.append(row["id"])
            conn.execute("COMMIT")
            return moved

        moved = await self._db.run(run)
        if moved and self._wakeup is not None:
            self._wakeup.set()
        return moved

    async def supersede_effects(self, job_ids: Sequence[str], *, actor: str) -> list[str]:
        def run(conn: sqlite3.Connection) -> list[str]:
            keys: list[str] = []
            conn.execute("BEGIN IMMEDIATE")
            for job_id in job_ids:
                conn.execute(_SUPERSEDE, {"actor": actor, "job_id": job_id})
                gone = conn.execute(
                    "DELETE FROM effects WHERE job_id = ? RETURNING key", (job_id,)
                ).fetchall()
                keys += sorted(row["key"] for row in gone)
            conn.execute("COMMIT")
            return keys

        return await self._db.run(run)

    async def list_effects(self, job_ids: Sequence[str]) -> list[EffectRecord]:
        def run(conn: sqlite3.Connection) -> list[EffectRecord]:
            rows = conn.execute(
                "SELECT key, state, job_id, result, created_at, recorded_at FROM effects"
                " WHERE job_id IN (SELECT value FROM json_each(?)) ORDER BY created_at, key",
                (_in_list(job_ids),),
            ).fetchall()
            return [
                EffectRecord(
                    key=r["key"],
                    state=r["state"],
                    job_id=r["job_id"],
                    result=json.loads(r["result"]) if r["result"] is not None else None,
                    created_at=_at(r["created_at"]),
                    recorded_at=_time(r["recorded_at"]),
                )
                for r in rows
            ]

        return await self._db.run(run)

    async def find_deliveries_by_event(
        self, event_id: str, source: str | None = None
    ) -> list[DeliveryView]:
        def run(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(
                "SELECT id FROM deliveries WHERE event_id = ? AND (? IS NULL OR source = ?)"
                " ORDER BY first_seen_at, id",
                (event_id, source, source),
            ).fetchall()
            return [row["id"] for row in rows]

        found = []
        for delivery_id in await self._db.run(run):
            view = await self.get_delivery(delivery_id)
            if view is not None:
                found.append(view)
        return found

    async def record_operator_action(
        self,
        *,
        actor: str,
        command: str,
        source: str | None = None,
        delivery_id: str | None = None,
        job_id: str | None = None,
        detail: str | None = None,
    ) -> None:
        params = {
            "actor": actor,
            "command": command,
            "source": source,
            "delivery_id": delivery_id,
            "job_id": job_id,
            "detail": detail,
        }
        await self._db.run(lambda conn: conn.execute(_AUDIT, params))

    async def list_operator_actions(
        self, *, delivery_id: str | None = None, limit: int = 100
    ) -> list[OperatorAction]:
        def run(conn: sqlite3.Connection) -> list[OperatorAction]:
            rows = conn.execute(
                "SELECT at, actor, command, source, delivery_id, job_id, detail"
                " FROM operator_actions WHERE (:d IS NULL OR delivery_id = :d)"
                " ORDER BY id LIMIT :limit",
                {"d": delivery_id, "limit": limit},
            ).fetchall()
            return [
                OperatorAction(
                    at=_at(r["at"]),
                    actor=r["actor"],
                    command=r["command"],
                    source=r["source"],
                    delivery_id=r["delivery_id"],
                    job_id=r["job_id"],
                    detail=r["detail"],
                )
                for r in rows
            ]

        return await self._db.run(run)

    async def list_source_states(self) -> list[SourceState]:
        def run(conn: sqlite3.Connection) -> list[SourceState]:
            rows = conn.execute(
                "SELECT source, paused, reason, changed_at, changed_by FROM source_state"
                " ORDER BY source"
            ).fetchall()
            return [_source_state(row) for row in rows]

        return await self._db.run(run)

    async def set_source_paused(
        self, source: str, *, paused: bool, reason: str | None, actor: str
    ) -> SourceState:
        def run(conn: sqlite3.Connection) -> SourceState:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                _SET_PAUSED,
                {"source": source, "paused": int(paused), "reason": reason, "actor": actor},
            ).fetchone()
            conn.execute(
                _AUDIT,
                {
                    "actor": actor,
                    "command": "pause" if paused else "resume",
                    "source": source,
                    "delivery_id": None,
                    "job_id": None,
                    "detail": None,
                },
            )
            conn.execute("COMMIT")
            return _source_state(row)

        return await self._db.run(run)

    async def count_purgeable_payloads(self, older_than_seconds: float) -> int:
        def run(conn: sqlite3.Connection) -> int:
            statement = "SELECT count(*) " + _PAYLOAD_PURGEABLE
            return int(conn.execute(statement, {"age": older_than_seconds}).fetchone()[0])

        return await self._db.run(run)

    async def purge_payloads(self, older_than_seconds: float, limit: int) -> int:
        def run(conn: sqlite3.Connection) -> int:
            conn.execute("BEGIN IMMEDIATE")
            ids = [
                row[0]
                for row in conn.execute(
                    "SELECT p.delivery_id " + _PAYLOAD_PURGEABLE + " LIMIT :limit",
                    {"age": older_than_seconds, "limit": limit},
                ).fetchall()
            ]
            conn.executemany("DELETE FROM payloads WHERE delivery_id = ?", [(i,) for i in ids])
            conn.executemany(
                f"UPDATE deliveries SET payload_purged_at = {NOW} WHERE id = ?",
                [(i,) for i in ids],
            )
            conn.execute("COMMIT")
            return len(ids)

        return await self._db.run(run)

    async def count_purgeable_deliveries(self, older_than_seconds: float) -> tuple[int, int]:
        def run(conn: sqlite3.Connection) -> tuple[int, int]:
            row = conn.execute(
                f"SELECT count(*) - coalesce(sum({_UNFINISHED}), 0) AS purgeable,"
                f" coalesce(sum({_UNFINISHED}), 0) AS held {_DELIVERY_OLD}",
                {"age": older_than_seconds},
            ).fetchone()
            return int(row["purgeable"]), int(row["held"])

        return await self._db.run(run)

    async def purge_deliveries(self, older_than_seconds: float, limit: int) -> int:
        def run(conn: sqlite3.Connection) -> int:
            conn.execute("BEGIN IMMEDIATE")
            ids = [
                (row[0],)
                for row in conn.execute(
                    f"SELECT d.id {_DELIVERY_OLD} AND NOT {_UNFINISHED} LIMIT :limit",
                    {"age": older_than_seconds, "limit": limit},
                ).fetchall()
            ]
            for table in ("effects", "effects_superseded"):
                conn.executemany(
                    f"DELETE FROM {table} WHERE job_id IN"
                    " (SELECT id FROM jobs WHERE delivery_id = ?)",
                    ids,
                )
            # Jobs, attempts and the payload go with the journal row (ON DELETE CASCADE).
            conn.executemany("DELETE FROM deliveries WHERE id = ?", ids)
            conn.execute("COMMIT")
            return len(ids)

        return await self._db.run(run)

    async def find_anomalies(
        self, check: str, *, older_than_seconds: float = 0.0, limit: int = 20
    ) -> Anomalies:
        count_sql, samples_sql = ANOMALY_CHECKS[check]
        params = {"age": older_than_seconds, "limit": limit}

        def run(conn: sqlite3.Connection) -> Anomalies:
            count = int(conn.execute(count_sql, params).fetchone()[0])
            samples: list[dict[str, Any]] = []
            if count:
                for row in conn.execute(samples_sql, params).fetchall():
                    sample = dict(row)
                    sample["since"] = _time(sample["since"])
                    samples.append(sample)
            return Anomalies(count, samples)

        return await self._db.run(run)
