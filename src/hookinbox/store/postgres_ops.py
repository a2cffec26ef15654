"""PostgreSQL statements for the operator commands, as a mixin of :class:`PostgresStore`.

Each write is one statement (data-modifying CTEs) or one short transaction, so many
operators and the receivers can act at once; the database clock (``now()``) sets every
cutoff. Every statement is a constant here; callers choose among them by name. Purges
delete in bounded batches with ``FOR UPDATE SKIP LOCKED`` so they never wait on, or
block, a worker holding a row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hookinbox.store.base import DeliveryView, EffectRecord, JobState
from hookinbox.store.ops_records import Anomalies, JobDetail, OperatorAction, SourceState

if TYPE_CHECKING:
    import asyncpg

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
WHERE j.state = 'failed' AND ($1::text IS NULL OR j.source = $1)
  AND ($2::timestamptz IS NULL OR j.failed_at >= $2)
"""
_LIST_FAILED_NEWEST = _JOB_DETAIL + _FAILED_WHERE + "ORDER BY j.failed_at DESC, j.id DESC LIMIT $3"
_LIST_FAILED_OLDEST = _JOB_DETAIL + _FAILED_WHERE + "ORDER BY j.failed_at, j.id LIMIT $3"

# $1 ids, $2 states, $3 trigger, $4 max attempts, $5 actor, $6 command
_REQUEUE = """
WITH moved AS (
    UPDATE jobs
    SET state = 'accepted', attempts = 0, max_attempts = $4, next_attempt_at = now(),
        trigger = $3, last_error = NULL, completed_at = NULL, failed_at = NULL,
        lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE id = ANY($1::text[]) AND state = ANY($2::text[])
    RETURNING id, source, delivery_id
),
audit AS (
    INSERT INTO operator_actions (actor, command, source, delivery_id, job_id, detail)
    SELECT $5, $6, source, delivery_id, id, 'trigger=' || $3 FROM moved
),
notify AS (
    SELECT pg_notify('hookinbox_jobs', '') FROM (SELECT 1 FROM moved LIMIT 1) AS any_moved
)
SELECT id FROM moved
UNION ALL
SELECT NULL FROM notify
"""

_SUPERSEDE = """
WITH gone AS (
    DELETE FROM effects WHERE job_id = ANY($1::text[])
    RETURNING key, job_id, state, result, created_at, recorded_at
),
kept AS (
    INSERT INTO effects_superseded
        (key, job_id, state, result, created_at, recorded_at, superseded_by)
    SELECT key, job_id, state, result, created_at, recorded_at, $2 FROM gone
)
SELECT key FROM gone ORDER BY key
"""

_AUDIT = """
INSERT INTO operator_actions (actor, command, source, delivery_id, job_id, detail)
VALUES ($1, $2, $3, $4, $5, $6)
"""

_SET_PAUSED = """
WITH state AS (
    INSERT INTO source_state (source, paused, reason, changed_by)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (source) DO UPDATE SET paused = excluded.paused, reason = excluded.reason,
        changed_at = now(), changed_by = excluded.changed_by
    RETURNING source, paused, reason, changed_at, changed_by
),
audit AS (
    INSERT INTO operator_actions (actor, command, source)
    VALUES ($4, CASE WHEN $2 THEN 'pause' ELSE 'resume' END, $1)
)
SELECT * FROM state
"""

# See the SQLite twin for the rules: completed (or jobless) before the cutoff only.
_PAYLOAD_PURGEABLE = """
FROM payloads p JOIN deliveries d ON d.id = p.delivery_id
WHERE d.first_seen_at < now() - make_interval(secs => $1)
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                  AND (j.state <> 'completed'
                       OR j.completed_at >= now() - make_interval(secs => $1)))
"""

_PURGE_PAYLOADS = f"""
WITH batch AS (
    SELECT p.delivery_id {_PAYLOAD_PURGEABLE}
    LIMIT $2 FOR UPDATE OF p SKIP LOCKED
),
gone AS (
    DELETE FROM payloads p USING batch WHERE p.delivery_id = batch.delivery_id
    RETURNING p.delivery_id
),
marked AS (
    UPDATE deliveries d SET payload_purged_at = now() FROM gone WHERE d.id = gone.delivery_id
)
SELECT count(*) FROM gone
"""

_UNFINISHED = "EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id AND j.state <> 'completed')"
_DELIVERY_OLD = "FROM deliveries d WHERE d.last_seen_at < now() - make_interval(secs => $1)"

_COUNT_DELIVERIES = f"""
SELECT count(*) FILTER (WHERE NOT {_UNFINISHED}) AS purgeable,
       count(*) FILTER (WHERE {_UNFINISHED}) AS held
{_DELIVERY_OLD}
"""

_PURGE_DELIVERIES = f"""
WITH batch AS (
    SELECT d.id {_DELIVERY_OLD} AND NOT {_UNFINISHED}
    LIMIT $2 FOR UPDATE OF d SKIP LOCKED
),
ledger AS (
    DELETE FROM effects e USING jobs j, batch
    WHERE e.job_id = j.id AND j.delivery_id = batch.id
),
superseded AS (
    DELETE FROM effects_superseded e USING jobs j, batch
    WHERE e.job_id = j.id AND j.delivery_id = batch.id
),
gone AS (
    DELETE FROM deliveries d USING batch WHERE d.id = batch.id RETURNING d.id
)
SELECT count(*) FROM gone
"""

_AGE = "now() - make_interval(secs => $1)"

#: check name -> (count statement, samples statement); $1 = age in seconds, $2 = limit.
#: Samples give id, delivery_id, source, detail, since[, deliveries].
ANOMALY_CHECKS: dict[str, tuple[str, str]] = {
    "expired_leases": (
        "SELECT count(*) FROM jobs WHERE state = 'processing' AND lease_expires_at < now()"
        " AND $1::float8 IS NOT NULL",
        "SELECT id, delivery_id, source, 'leased by ' || coalesce(leased_by, '?')"
        " || ', attempt ' || attempts || '/' || max_attempts AS detail,"
        " lease_expires_at AS since FROM jobs"
        " WHERE state = 'processing' AND lease_expires_at < now() AND $1::float8 IS NOT NULL"
        " ORDER BY lease_expires_at LIMIT $2",
    ),
    "stale_accepted": (
        f"SELECT count(*) FROM jobs WHERE state = 'accepted' AND created_at < {_AGE}",
        "SELECT id, delivery_id, source, coalesce(last_error, 'never ran') AS detail,"
        f" created_at AS since FROM jobs WHERE state = 'accepted' AND created_at < {_AGE}"
        " ORDER BY created_at LIMIT $2",
    ),
    "failed_past_review": (
        f"SELECT count(*) FROM jobs WHERE state = 'failed' AND failed_at < {_AGE}",
        "SELECT id, delivery_id, source, coalesce(last_error, '') AS detail,"
        f" failed_at AS since FROM jobs WHERE state = 'failed' AND failed_at < {_AGE}"
        " ORDER BY failed_at LIMIT $2",
    ),
    "deliveries_without_jobs": (
        "SELECT count(*) FROM deliveries d"
        " WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id)"
        " AND $1::float8 IS NOT NULL",
        "SELECT min(d.id) AS id, min(d.id) AS delivery_id, d.source, d.event_type AS detail,"
        " min(d.first_seen_at) AS since, count(*) AS deliveries FROM deliveries d"
        " WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id)"
        " AND $1::float8 IS NOT NULL"
        " GROUP BY d.source, d.event_type ORDER BY d.source, d.event_type LIMIT $2",
    ),
    "unrecorded_effects": (
        "SELECT count(*) FROM effects e LEFT JOIN jobs j ON j.id = e.job_id"
        f" WHERE e.state = 'started' AND e.created_at < {_AGE}"
        " AND (j.state IS NULL OR j.state <> 'processing')",
        "SELECT e.key AS id, j.delivery_id, j.source,"
        " 'job ' || coalesce(e.job_id, '?') || ' is ' || coalesce(j.state, 'gone') AS detail,"
        " e.created_at AS since FROM effects e LEFT JOIN jobs j ON j.id = e.job_id"
        f" WHERE e.state = 'started' AND e.created_at < {_AGE}"
        " AND (j.state IS NULL OR j.state <> 'processing') ORDER BY e.created_at LIMIT $2",
    ),
}


def _job_detail(row: Any) -> JobDetail:
    return JobDetail(**dict(row))


def _source_state(row: Any) -> SourceState:
    return SourceState(**dict(row))


class PostgresOperatorsMixin:
    """Operator statements; mixed into :class:`~hookinbox.store.postgres.PostgresStore`."""

    if TYPE_CHECKING:

        def _conn(self) -> AbstractAsyncContextManager[asyncpg.Connection]: ...

        async def get_delivery(
            self, ref: str, source: str | None = None
        ) -> DeliveryView | None: ...

    async def get_job(self, job_id: str) -> JobDetail | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(_JOB_DETAIL + " WHERE j.id = $1", job_id)
        return _job_detail(row) if row is not None else None

    async def list_failed_jobs(
        self,
        *,
        source: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
        oldest_first: bool = False,
    ) -> list[JobDetail]:
        statement = _LIST_FAILED_OLDEST if oldest_first else _LIST_FAILED_NEWEST
        async with self._conn() as conn:
            rows = await conn.fetch(statement, source, since, limit)
        return [_job_detail(row) for row in rows]

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
        async with self._conn() as conn:
            rows = await conn.fetch(
                _REQUEUE, list(job_ids), list(from_states), trigger, max_attempts, actor, command
            )
        moved = {row["id"] for row in rows if row["id"] is not None}
        return [job_id for job_id in job_ids if job_id in moved]

    async def supersede_effects(self, job_ids: Sequence[str], *, actor: str) -> list[str]:
        async with self._conn() as conn:
            rows = await conn.fetch(_SUPERSEDE, list(job_ids), actor)
        return [row["key"] for row in rows]

    async def list_effects(self, job_ids: Sequence[str]) -> list[EffectRecord]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT key, state, job_id, result, created_at, recorded_at FROM effects"
                " WHERE job_id = ANY($1::text[]) ORDER BY created_at, key",
                list(job_ids),
            )
        return [
            EffectRecord(
                key=r["key"],
                state=r["state"],
                job_id=r["job_id"],
                result=json.loads(r["result"]) if r["result"] is not None else None,
                created_at=r["created_at"],
                recorded_at=r["recorded_at"],
            )
            for r in rows
        ]

    async def find_deliveries_by_event(
        self, event_id: str, source: str | None = None
    ) -> list[DeliveryView]:
        async with self._conn() as conn:
            ids = await conn.fetch(
                "SELECT id FROM deliveries WHERE event_id = $1"
                " AND ($2::text IS NULL OR source = $2) ORDER BY first_seen_at, id",
                event_id,
                source,
            )
        found = []
        for row in ids:
            view = await self.get_delivery(row["id"])
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
        async with self._conn() as conn:
            await conn.execute(_AUDIT, actor, command, source, delivery_id, job_id, detail)

    async def list_operator_actions(
        self, *, delivery_id: str | None = None, limit: int = 100
    ) -> list[OperatorAction]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT at, actor, command, source, delivery_id, job_id, detail"
                " FROM operator_actions WHERE ($1::text IS NULL OR delivery_id = $1)"
                " ORDER BY id LIMIT $2",
                delivery_id,
                limit,
            )
        return [OperatorAction(**dict(row)) for row in rows]

    async def list_source_states(self) -> list[SourceState]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT source, paused, reason, changed_at, changed_by FROM source_state"
                " ORDER BY source"
            )
        return [_source_state(row) for row in rows]

    async def set_source_paused(
        self, source: str, *, paused: bool, reason: str | None, actor: str
    ) -> SourceState:
        async with self._conn() as conn:
            row = await conn.fetchrow(_SET_PAUSED, source, paused, reason, actor)
        return _source_state(row)

    async def count_purgeable_payloads(self, older_than_seconds: float) -> int:
        async with self._conn() as conn:
            count = await conn.fetchval(
                "SELECT count(*) " + _PAYLOAD_PURGEABLE, float(older_than_seconds)
            )
        return int(count)

    async def purge_payloads(self, older_than_seconds: float, limit: int) -> int:
        async with self._conn() as conn:
            count = await conn.fetchval(_PURGE_PAYLOADS, float(older_than_seconds), limit)
        return int(count)

    async def count_purgeable_deliveries(self, older_than_seconds: float) -> tuple[int, int]:
        async with self._conn() as conn:
            row = await conn.fetchrow(_COUNT_DELIVERIES, float(older_than_seconds))
        return int(row["purgeable"]), int(row["held"])

    async def purge_deliveries(self, older_than_seconds: float, limit: int) -> int:
        async with self._conn() as conn:
            count = await conn.fetchval(_PURGE_DELIVERIES, float(older_than_seconds), limit)
        return int(count)

    async def find_anomalies(
        self, check: str, *, older_than_seconds: float = 0.0, limit: int = 20
    ) -> Anomalies:
        count_sql, samples_sql = ANOMALY_CHECKS[check]
        age = float(older_than_seconds)
        async with self._conn() as conn:
            count = int(await conn.fetchval(count_sql, age))
            rows = await conn.fetch(samples_sql, age, limit) if count else []
        return Anomalies(count, [dict(row) for row in rows])


__all__ = ["ANOMALY_CHECKS", "PostgresOperatorsMixin"]
