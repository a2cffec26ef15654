"""PostgreSQL store: the production backend and the scale-out path.

Any number of receiver and worker processes share one database. The receiver's batch is
ONE statement (data-modifying CTEs over ``unnest`` arrays) in autocommit: one round trip
reserves a whole batch, and a repeat costs an ``ON CONFLICT DO NOTHING``, never an
aborted transaction. Workers claim with ``FOR UPDATE SKIP LOCKED`` and are woken by
LISTEN/NOTIFY (``pg_notify`` inside that same statement, delivered at its commit).
The database clock (``now()``) sets every lease and due time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any

import asyncpg
import orjson

from hookinbox.errors import StoreError, StoreUnavailable
from hookinbox.store.base import (
    AttemptView,
    ClaimedJob,
    DeliveryStatus,
    DeliveryView,
    EffectRecord,
    EffectStart,
    JobState,
    JobView,
    NewDelivery,
    Reservation,
    Store,
)
from hookinbox.store.migrations import load_migrations
from hookinbox.store.postgres_metrics import PostgresMetricsMixin
from hookinbox.store.postgres_ops import PostgresOperatorsMixin
from hookinbox.store.postgres_resources import PostgresResourcesMixin

NOTIFY_CHANNEL = "hookinbox_jobs"
_CONNECT_TIMEOUT = 5.0
_COMMAND_TIMEOUT = 30.0
#: A reservation that takes longer is answered 503: providers wait 10-30 s for an answer,
#: and a retry later beats a timeout now.
_RESERVE_TIMEOUT = 5.0

_RESERVE = """
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                         $6::bytea[], $7::text[], $13::int[])
        AS t(id, source, event_id, event_type, body_sha256, body, headers, seen)
),
ins AS (
    INSERT INTO deliveries (id, source, event_id, event_type, body_sha256, delivery_count)
    SELECT id, source, event_id, event_type, body_sha256, seen FROM input
    ON CONFLICT (source, event_id) DO NOTHING
    RETURNING id
),
pay AS (
    INSERT INTO payloads (delivery_id, body, headers)
    SELECT i.id, i.body, i.headers FROM input i JOIN ins ON ins.id = i.id
),
new_jobs AS (
    INSERT INTO jobs (id, delivery_id, source, action, max_attempts)
    SELECT j.id, j.delivery_id, j.source, j.action, j.max_attempts
    FROM unnest($8::text[], $9::text[], $10::text[], $11::text[], $12::int[])
        AS j(id, delivery_id, source, action, max_attempts)
    JOIN ins ON ins.id = j.delivery_id
),
dup AS (
    UPDATE deliveries d
    SET last_seen_at = now(),
        delivery_count = d.delivery_count + i.seen,
        conflicts = d.conflicts + i.seen * (d.body_sha256 <> i.body_sha256)::int
    FROM input i
    WHERE d.source = i.source AND d.event_id = i.event_id
      AND NOT EXISTS (SELECT 1 FROM ins WHERE ins.id = i.id)
    RETURNING i.id AS request_id, d.id AS delivery_id, d.body_sha256,
              d.body_sha256 <> i.body_sha256 AS conflict
),
notify AS (
    SELECT pg_notify('hookinbox_jobs', '') FROM (SELECT 1 FROM ins LIMIT 1) AS any_new
)
SELECT 'accepted' AS outcome, id AS request_id, id AS delivery_id,
       NULL::text AS body_sha256, false AS conflict FROM ins
UNION ALL
SELECT 'duplicate', request_id, delivery_id, body_sha256, conflict FROM dup
UNION ALL
SELECT 'notify', NULL, NULL, NULL, false FROM notify
"""

_CLAIM = """
WITH due AS (
    SELECT id FROM jobs
    WHERE (state = 'accepted' AND next_attempt_at <= now())
       OR (state = 'processing' AND lease_expires_at < now() AND attempts < max_attempts)
    ORDER BY next_attempt_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE jobs j
    SET state = 'processing', attempts = j.attempts + 1, lease_token = $2, leased_by = $3,
        lease_expires_at = now() + make_interval(secs => $4), updated_at = now()
    FROM due WHERE j.id = due.id
    RETURNING j.id, j.delivery_id, j.source, j.action, j.attempts, j.max_attempts, j.trigger
),
expired AS (
    UPDATE attempts a
    SET ended_at = now(), outcome = 'lease_expired', error_code = 'lease_expired'
    FROM claimed c WHERE a.job_id = c.id AND a.ended_at IS NULL
),
started AS (
    INSERT INTO attempts (job_id, number, trigger, worker)
    SELECT id, attempts, trigger, $3 FROM claimed
)
SELECT c.id, c.delivery_id, c.source, c.action, c.attempts, c.max_attempts, c.trigger,
       d.event_id, d.event_type, p.body, p.headers
FROM claimed c
JOIN deliveries d ON d.id = c.delivery_id
LEFT JOIN payloads p ON p.delivery_id = c.delivery_id
"""

# $1 job id, $2 lease token, then the new job columns; the attempt row gets $outcome/$code.
_FINISH = """
WITH done AS (
    UPDATE jobs
    SET state = $3, last_error = coalesce($4, last_error),
        business_id = coalesce($5, business_id),
        next_attempt_at = now() + make_interval(secs => $6),
        max_attempts = max_attempts + $8::int,
        completed_at = CASE WHEN $3 = 'completed' THEN now() ELSE completed_at END,
        failed_at = CASE WHEN $3 = 'failed' THEN now() ELSE failed_at END,
        lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE id = $1 AND lease_token = $2 AND state = 'processing'
    RETURNING id
),
ended AS (
    UPDATE attempts a SET ended_at = now(), outcome = $7, error_code = $4
    FROM done WHERE a.job_id = done.id AND a.ended_at IS NULL
)
SELECT count(*) FROM done
"""

_FAIL_EXHAUSTED = """
WITH dead AS (
    UPDATE jobs
    SET state = 'failed', last_error = 'lease_expired', failed_at = now(),
        lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE state = 'processing' AND lease_expires_at < now() AND attempts >= max_attempts
    RETURNING id
),
ended AS (
    UPDATE attempts a SET ended_at = now(), outcome = 'lease_expired', error_code = 'lease_expired'
    FROM dead WHERE a.job_id = dead.id AND a.ended_at IS NULL
)
SELECT count(*) FROM dead
"""

_DELIVERY_COLUMNS = """
    d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
    d.delivery_count, d.conflicts,
    EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id) AS payload_retained
"""

_GET_DELIVERY = f"""
SELECT {_DELIVERY_COLUMNS} FROM deliveries d
WHERE d.id = $1 OR (d.event_id = $1 AND ($2::text IS NULL OR d.source = $2))
ORDER BY (d.id = $1) DESC, d.first_seen_at DESC
LIMIT 1
"""

_JOBS_OF = """
SELECT id, action, state, attempts, max_attempts, last_error, next_attempt_at,
       lease_expires_at, business_id, created_at, updated_at
FROM jobs WHERE delivery_id = $1 ORDER BY action
"""

_LIST_DELIVERIES = f"""
SELECT {_DELIVERY_COLUMNS}, s.states, s.status
FROM deliveries d
CROSS JOIN LATERAL (
    SELECT coalesce(array_agg(j.state ORDER BY j.action), '{{}}') AS states,
           CASE WHEN bool_or(j.state = 'failed') THEN 'failed'
                WHEN bool_or(j.state = 'processing') THEN 'processing'
                WHEN coalesce(bool_and(j.state = 'completed'), true) THEN 'completed'
                ELSE 'accepted' END AS status
    FROM jobs j WHERE j.delivery_id = d.id
) s
WHERE ($1::text IS NULL OR d.source = $1)
  AND ($2::text IS NULL OR d.id < $2)
  AND ($3::text IS NULL OR s.status = $3)
ORDER BY d.id DESC
LIMIT $4
"""

_START_EFFECT = """
INSERT INTO effects (key, job_id, state) VALUES ($1, $2, 'started')
ON CONFLICT (key) DO NOTHING
"""

_JOB_IS_LIVE = """
SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1 AND state = 'processing'
               AND lease_expires_at > now())
"""

_RECORD_EFFECT = """
INSERT INTO effects (key, job_id, state, result, recorded_at)
VALUES ($1, NULL, 'recorded', $2, now())
ON CONFLICT (key) DO UPDATE SET state = 'recorded', result = excluded.result, recorded_at = now()
WHERE effects.state = 'started'
"""

_GET_EFFECT = """
SELECT key, state, job_id, result, created_at, recorded_at FROM effects WHERE key = $1
"""

_DRIVER_ERRORS = (OSError, asyncio.TimeoutError, asyncpg.InterfaceError, asyncpg.PostgresError)


async def _no_reset(connection: asyncpg.Connection) -> None:
    """Skip asyncpg's per-release reset: our connections carry no session state, and the
    reset is a round trip per request on the hot path."""


class PostgresStore(PostgresOperatorsMixin, PostgresMetricsMixin, PostgresResourcesMixin, Store):
    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        self.url = url
        self._pool_size = pool_size
        self._pool: asyncpg.Pool | None = None
        self._listener: asyncpg.Connection | None = None
        self._wakeup = asyncio.Event()

    # -- lifecycle ------------------------------------------------------------------
    async def open(self, *, migrate: bool = True) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self.url,
                min_size=1,
                max_size=self._pool_size,
                timeout=_CONNECT_TIMEOUT,
                command_timeout=_COMMAND_TIMEOUT,
                reset=_no_reset,
            )
        except _DRIVER_ERRORS as exc:
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {type(exc).__name__}") from exc
        if migrate:
            await self.migrate()

    async def close(self) -> None:
        if self._listener is not None:
            try:
                await asyncio.wait_for(self._listener.close(), 2)
            except (*_DRIVER_ERRORS, RuntimeError):
                self._listener.terminate()
            self._listener = None
        if self._pool is not None:
            try:
                await asyncio.wait_for(self._pool.close(), 5)
            except (*_DRIVER_ERRORS, RuntimeError):
                self._pool.terminate()
            self._pool = None

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[asyncpg.Connection]:
        if self._pool is None:
            raise StoreUnavailable("the store is not open")
        try:
            async with self._pool.acquire(timeout=_CONNECT_TIMEOUT) as conn:
                yield conn
        except (TimeoutError, OSError, asyncpg.InterfaceError) as exc:
            raise StoreUnavailable(f"PostgreSQL unavailable: {type(exc).__name__}") from exc
        except (asyncpg.PostgresConnectionError, asyncpg.CannotConnectNowError) as exc:
            raise StoreUnavailable(f"PostgreSQL unavailable: {type(exc).__name__}") from exc
        except asyncpg.PostgresError as exc:
            raise StoreError(f"PostgreSQL error {exc.sqlstate}: {type(exc).__name__}") from exc

    async def migrate(self) -> list[str]:
        applied: list[str] = []
        async with self._conn() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('hookinbox_migrate'))")
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
            for migration in load_migrations("postgres"):
                if migration.version in done:
                    continue
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                    migration.version,
                    migration.name,
                )
                applied.append(migration.name)
        return applied

    async def ping(self) -> None:
        async with self._conn() as conn:
            await conn.fetchval("SELECT 1")

    # -- receiving ------------------------------------------------------------------
    async def reserve_deliveries(self, items: Sequence[NewDelivery]) -> list[Reservation]:
        answers: dict[str, Reservation] = {}
        pending = list(items)
        # A row committed by a concurrent receiver after this statement's snapshot is
        # neither inserted nor visible to the update; such items go round again.
        for _ in range(5):
            if not pending:
                break
            try:
                rows = await self._reserve_once(pending)
            except StoreError as exc:
                # Receivers in other processes may lock the same rows in another order.
                if isinstance(exc.__cause__, asyncpg.DeadlockDetectedError):
                    continue
                raise
            for row in rows:
                if row["outcome"] == "notify":
                    continue
                answers[row["request_id"]] = Reservation(
                    outcome=row["outcome"],
                    delivery_id=row["delivery_id"],
                    conflict=bool(row["conflict"]),
                    first_body_sha256=row["body_sha256"] or "",
                )
            pending = [item for item in pending if item.id not in answers]
        if pending:
            raise StoreError("could not settle a reservation after repeated conflicts")
        return [answers[item.id] for item in items]

    async def _reserve_once(self, items: Sequence[NewDelivery]) -> list[asyncpg.Record]:
        jobs = [(job, item) for item in items for job in item.jobs]
        async with self._conn() as conn:
            rows: list[asyncpg.Record] = await conn.fetch(
                _RESERVE,
                [i.id for i in items],
                [i.source for i in items],
                [i.event_id for i in items],
                [i.event_type for i in items],
                [i.body_sha256 for i in items],
                [i.body for i in items],
                [orjson.dumps(i.headers).decode() for i in items],
                [job.id for job, _ in jobs],
                [item.id for _, item in jobs],
                [item.source for _, item in jobs],
                [job.action for job, _ in jobs],
                [item.max_attempts for _, item in jobs],
                [i.seen for i in items],
                timeout=_RESERVE_TIMEOUT,
            )
        return rows

    # -- working --------------------------------------------------------------------
    async def claim_due_jobs(
        self, worker_id: str, limit: int, lease_seconds: float
    ) -> list[ClaimedJob]:
        token = _token()
        async with self._conn() as conn:
            rows = await conn.fetch(_CLAIM, limit, token, worker_id, float(lease_seconds))
        return [ClaimedJob.from_row(r, token) for r in rows]

    async def renew_lease(self, job_id: str, lease_token: str, lease_seconds: float) -> bool:
        async with self._conn() as conn:
            status = await conn.execute(
                "UPDATE jobs SET lease_expires_at = now() + make_interval(secs => $3) "
                "WHERE id = $1 AND lease_token = $2 AND state = 'processing'",
                job_id,
                lease_token,
                float(lease_seconds),
            )
        return bool(status.endswith(" 1"))

    async def _finish(
        self,
        job_id: str,
        lease_token: str,
        *,
        state: JobState,
        outcome: str,
        error_code: str | None = None,
        business_id: str | None = None,
        delay_seconds: float = 0.0,
        refund_attempt: bool = False,
    ) -> bool:
        async with self._conn() as conn:
            count = await conn.fetchval(
                _FINISH,
                job_id,
                lease_token,
                state,
                error_code,
                business_id,
                float(delay_seconds),
                outcome,
                int(refund_attempt),
            )
        return bool(count)

    async def fail_exhausted_leases(self) -> int:
        async with self._conn() as conn:
            return int(await conn.fetchval(_FAIL_EXHAUSTED))

    async def wait_for_jobs(self, timeout: float) -> None:
        if self._listener is None or self._listener.is_closed():
            await self._listen()
        with suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), timeout)
        self._wakeup.clear()

    async def _listen(self) -> None:
        """A dedicated LISTEN connection; when it cannot be had, workers simply poll."""
        self._listener = None
        try:
            conn = await asyncpg.connect(self.url, timeout=_CONNECT_TIMEOUT)
            await conn.add_listener(NOTIFY_CHANNEL, self._on_notify)
        except _DRIVER_ERRORS:
            return
        self._listener = conn

    def _on_notify(self, *_: object) -> None:
        self._wakeup.set()

    # -- effects ledger ---------------------------------------------------------------
    async def get_effect(self, key: str) -> EffectRecord | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(_GET_EFFECT, key)
        return _effect(row) if row else None

    async def start_effect(self, key: str, job_id: str) -> EffectStart:
        async with self._conn() as conn:
            status = await conn.execute(_START_EFFECT, key, job_id)
            record = _effect(await conn.fetchrow(_GET_EFFECT, key))
            created = status.endswith(" 1")
            live = False
            if not created and record.state == "started" and record.job_id != job_id:
                live = bool(await conn.fetchval(_JOB_IS_LIVE, record.job_id))
        return EffectStart(record, created, live)

    async def record_effect(self, key: str, result: Any) -> EffectRecord:
        async with self._conn() as conn:
            await conn.execute(_RECORD_EFFECT, key, json.dumps(result))
            row = await conn.fetchrow(_GET_EFFECT, key)
        return _effect(row)

    # -- reading --------------------------------------------------------------------
    async def get_delivery(self, ref: str, source: str | None = None) -> DeliveryView | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(_GET_DELIVERY, ref, source)
            if row is None:
                return None
            jobs = await conn.fetch(_JOBS_OF, row["id"])
        return _delivery(row, jobs=tuple(_job(j) for j in jobs))

    async def list_deliveries(
        self,
        *,
        status: DeliveryStatus | None = None,
        source: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[DeliveryView]:
        async with self._conn() as conn:
            rows = await conn.fetch(_LIST_DELIVERIES, source, before, status, limit)
        return [_delivery(r, job_states=tuple(r["states"])) for r in rows]

    async def list_attempts(self, job_id: str) -> list[AttemptView]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT number, trigger, worker, started_at, ended_at, outcome, error_code"
                " FROM attempts WHERE job_id = $1 ORDER BY id",
                job_id,
            )
        return [AttemptView(**dict(r)) for r in rows]

    async def count_rows(self) -> dict[str, int]:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM deliveries) AS deliveries,"
                " (SELECT count(*) FROM jobs) AS jobs,"
                " (SELECT count(*) FROM payloads) AS payloads,"
                " (SELECT count(*) FROM effects) AS effects,"
                " (SELECT count(*) FROM attempts) AS attempts"
            )
        return {key: int(value) for key, value in dict(row).items()}


def _token() -> str:
    import secrets

    return secrets.token_hex(8)


def _effect(row: Any) -> EffectRecord:
    return EffectRecord(
        key=row["key"],
        state=row["state"],
        job_id=row["job_id"],
        result=json.loads(row["result"]) if row["result"] is not None else None,
        created_at=row["created_at"],
        recorded_at=row["recorded_at"],
    )


def _job(row: Any) -> JobView:
    return JobView(
        id=row["id"],
        action=row["action"],
        state=row["state"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        last_error=row["last_error"],
        next_attempt_at=row["next_attempt_at"],
        lease_expires_at=row["lease_expires_at"],
        business_id=row["business_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _delivery(row: Any, **extra: Any) -> DeliveryView:
    return DeliveryView(
        id=row["id"],
        source=row["source"],
        event_id=row["event_id"],
        event_type=row["event_type"],
        body_sha256=row["body_sha256"],
        first_seen_at=row["first_seen_at"],
        last_seen_at=row["last_seen_at"],
        delivery_count=row["delivery_count"],
        conflicts=row["conflicts"],
        payload_retained=row["payload_retained"],
        **extra,
    )
