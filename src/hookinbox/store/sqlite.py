"""SQLite store: the embedded default, one file in WAL mode, nothing to install.

One thread owns the connection and runs every statement, so the event loop never blocks
on SQLite and a receiver's batch of reservations is one transaction, one fsync. Several
processes (``hookinbox serve`` plus ``hookinbox worker``) may share the file: writes take
SQLite's lock with ``BEGIN IMMEDIATE`` and wait for it up to ``busy_timeout``. Workers of
this process are woken right after a commit that queued jobs; other processes poll.
Times are unix seconds from SQLite's clock (:data:`NOW`), so every process of the host
agrees on leases and due times.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import secrets
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl

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
from hookinbox.store.sqlite_clock import NOW
from hookinbox.store.sqlite_journal import reserve_one
from hookinbox.store.sqlite_metrics import SQLiteMetricsMixin
from hookinbox.store.sqlite_ops import SQLiteOperatorsMixin
from hookinbox.store.sqlite_resources import SQLiteResourcesMixin

T = TypeVar("T")

#: How long a write waits for another process's lock before the receiver answers 503.
_BUSY_TIMEOUT_MS = 5_000

_CLAIM = f"""
UPDATE jobs
SET state = 'processing', attempts = attempts + 1, lease_token = :token, leased_by = :worker,
    lease_expires_at = {NOW} + :lease, updated_at = {NOW}
WHERE id IN (
    SELECT id FROM jobs
    WHERE (state = 'accepted' AND next_attempt_at <= {NOW})
       OR (state = 'processing' AND lease_expires_at < {NOW} AND attempts < max_attempts)
    ORDER BY next_attempt_at
    LIMIT :limit
)
RETURNING id, delivery_id, source, action, attempts, max_attempts, trigger
"""

_FINISH = f"""
UPDATE jobs
SET state = :state, last_error = coalesce(:error, last_error),
    business_id = coalesce(:business_id, business_id),
    next_attempt_at = {NOW} + :delay,
    max_attempts = max_attempts + :refund,
    completed_at = CASE WHEN :state = 'completed' THEN {NOW} ELSE completed_at END,
    failed_at = CASE WHEN :state = 'failed' THEN {NOW} ELSE failed_at END,
    lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = {NOW}
WHERE id = :id AND lease_token = :token AND state = 'processing'
"""

_END_ATTEMPT = f"""
UPDATE attempts SET ended_at = {NOW}, outcome = :outcome, error_code = :error
WHERE job_id = :id AND ended_at IS NULL
"""

_DELIVERY_COLUMNS = """
    d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
    d.delivery_count, d.conflicts,
    EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id) AS payload_retained
"""

_STATUS = """
    CASE WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id AND j.state = 'failed')
              THEN 'failed'
         WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id AND j.state = 'processing')
              THEN 'processing'
         WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                          AND j.state <> 'completed') THEN 'completed'
         ELSE 'accepted' END
"""


class _DatabaseThread:
    """Runs callables against one connection, in order, on one thread."""

    def __init__(self, path: str, busy_timeout_ms: int) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="hookinbox-sqlite", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise StoreUnavailable(f"cannot open SQLite database: {self._error}") from self._error

    def _connect(self) -> sqlite3.Connection:
        if self._path != ":memory:":
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        # FULL: a commit is on disk before the receiver answers 2xx, even on power loss.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def _run(self) -> None:
        try:
            conn = self._connect()
        except (sqlite3.Error, OSError) as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        while True:
            item = self._queue.get()
            if item is None:
                break
            fn, future, loop = item
            try:
                result = fn(conn)
            except BaseException as exc:
                if conn.in_transaction:
                    conn.rollback()
                loop.call_soon_threadsafe(_settle, future, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, future, result, None)
        conn.close()

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if not self._thread.is_alive():
            raise StoreUnavailable("the store is not open")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put((fn, future, loop))
        try:
            return await future
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(f"SQLite unavailable: {exc}") from exc
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite error: {type(exc).__name__}: {exc}") from exc

    def stop(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout=10)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def parse_sqlite_url(url: str) -> tuple[str, int]:
    """``sqlite:///var/x.db`` is relative, ``sqlite:////tmp/x.db`` absolute; the query may
    set ``busy_timeout_ms`` (how long a write waits for another process's lock)."""
    path, _, query = url.removeprefix("sqlite://").removeprefix("/").partition("?")
    if not path:
        raise StoreError("the sqlite URL names no file")
    busy_timeout = _BUSY_TIMEOUT_MS
    for key, value in parse_qsl(query):
        if key != "busy_timeout_ms" or not value.isdigit():
            raise StoreError(f"unknown or invalid sqlite URL parameter {key!r}")
        busy_timeout = int(value)
    return path, busy_timeout


class SQLiteStore(SQLiteOperatorsMixin, SQLiteMetricsMixin, SQLiteResourcesMixin, Store):
    def __init__(self, url: str) -> None:
        self.url = url
        self._db = _DatabaseThread(*parse_sqlite_url(url))
        self._wakeup: asyncio.Event | None = None

    # -- lifecycle ------------------------------------------------------------------
    async def open(self, *, migrate: bool = True) -> None:
        self._wakeup = asyncio.Event()
        await asyncio.to_thread(self._db.start)
        if migrate:
            await self.migrate()

    async def close(self) -> None:
        await asyncio.to_thread(self._db.stop)

    async def migrate(self) -> list[str]:
        def run(conn: sqlite3.Connection) -> list[str]:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
                " name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            applied = []
            for migration in load_migrations("sqlite"):
                if migration.version in done:
                    continue
                # One script, one transaction: a second process racing us fails on the
                # schema_migrations key and rolls back everything it began.
                script = (
                    "BEGIN IMMEDIATE;\n"
                    f"INSERT INTO schema_migrations VALUES ({migration.version}, "
                    f"'{migration.name}', {NOW});\n{migration.sql}\nCOMMIT;"
                )
                try:
                    conn.executescript(script)
                except sqlite3.IntegrityError:
                    conn.rollback()
                    continue
                applied.append(migration.name)
            return applied

        return await self._db.run(run)

    async def ping(self) -> None:
        """Ready means able to commit: take the write lock and let it go (a read would
        succeed while another process holds the lock and every reservation fails)."""

        def run(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")

        await self._db.run(run)

    # -- receiving ------------------------------------------------------------------
    async def reserve_deliveries(self, items: Sequence[NewDelivery]) -> list[Reservation]:
        def run(conn: sqlite3.Connection) -> list[Reservation]:
            conn.execute("BEGIN IMMEDIATE")
            answers = [reserve_one(conn, item) for item in items]
            conn.execute("COMMIT")
            return answers

        answers = await self._db.run(run)
        if self._wakeup is not None and any(a.outcome == "accepted" for a in answers):
            self._wakeup.set()
        return answers

    # -- working --------------------------------------------------------------------
    async def claim_due_jobs(
        self, worker_id: str, limit: int, lease_seconds: float
    ) -> list[ClaimedJob]:
        token = secrets.token_hex(8)

        def run(conn: sqlite3.Connection) -> list[ClaimedJob]:
            conn.execute("BEGIN IMMEDIATE")
            claimed = conn.execute(
                _CLAIM,
                {"token": token, "worker": worker_id, "lease": lease_seconds, "limit": limit},
            ).fetchall()
            jobs = []
            for row in claimed:
                conn.execute(
                    f"UPDATE attempts SET ended_at = {NOW}, outcome = 'lease_expired',"
                    " error_code = 'lease_expired' WHERE job_id = ? AND ended_at IS NULL",
                    (row["id"],),
                )
                conn.execute(
                    "INSERT INTO attempts (job_id, number, trigger, worker, started_at)"
                    f" VALUES (?, ?, ?, ?, {NOW})",
                    (row["id"], row["attempts"], row["trigger"], worker_id),
                )
                extra = conn.execute(
                    "SELECT d.event_id, d.event_type, p.body, p.headers FROM deliveries d"
                    " LEFT JOIN payloads p ON p.delivery_id = d.id WHERE d.id = ?",
                    (row["delivery_id"],),
                ).fetchone()
                jobs.append(ClaimedJob.from_row({**dict(row), **dict(extra)}, token))
            conn.execute("COMMIT")
            return jobs

        return await self._db.run(run)

    async def renew_lease(self, job_id: str, lease_token: str, lease_seconds: float) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                f"UPDATE jobs SET lease_expires_at = {NOW} + ?"
                " WHERE id = ? AND lease_token = ? AND state = 'processing'",
                (lease_seconds, job_id, lease_token),
            )
            return cur.rowcount == 1

        return await self._db.run(run)

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
        def run(conn: sqlite3.Connection) -> bool:
            conn.execute("BEGIN IMMEDIATE")
            cur = conn.execute(
                _FINISH,
                {
                    "id": job_id,
                    "token": lease_token,
                    "state": state,
                    "error": error_code,
                    "business_id": business_id,
                    "delay": delay_seconds,
                    "refund": int(refund_attempt),
                },
            )
            ours = cur.rowcount == 1
            if ours:
                conn.execute(_END_ATTEMPT, {"id": job_id, "outcome": outcome, "error": error_code})
            conn.execute("COMMIT")
            return ours

        return await self._db.run(run)

    async def fail_exhausted_leases(self) -> int:
        def run(conn: sqlite3.Connection) -> int:
            conn.execute("BEGIN IMMEDIATE")
            dead = conn.execute(
                f"UPDATE jobs SET state = 'failed', last_error = 'lease_expired',"
                f" failed_at = {NOW}, lease_token = NULL, leased_by = NULL,"
                f" lease_expires_at = NULL, updated_at = {NOW}"
                f" WHERE state = 'processing' AND lease_expires_at < {NOW}"
                " AND attempts >= max_attempts RETURNING id"
            ).fetchall()
            for row in dead:
                conn.execute(
                    _END_ATTEMPT,
                    {"id": row["id"], "outcome": "lease_expired", "error": "lease_expired"},
                )
            conn.execute("COMMIT")
            return len(dead)

        return await self._db.run(run)

    async def wait_for_jobs(self, timeout: float) -> None:
        if self._wakeup is None:
            await asyncio.sleep(timeout)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), timeout)
        self._wakeup.clear()

    # -- effects ledger ---------------------------------------------------------------
    async def get_effect(self, key: str) -> EffectRecord | None:
        def run(conn: sqlite3.Connection) -> EffectRecord | None:
            row = conn.execute("SELECT * FROM effects WHERE key = ?", (key,)).fetchone()
            return _effect(row) if row else None

        return await self._db.run(run)

    async def start_effect(self, key: str, job_id: str) -> EffectStart:
        def run(conn: sqlite3.Connection) -> EffectStart:
            created = (
                conn.execute(
                    "INSERT INTO effects (key, job_id, state, created_at)"
                    f" VALUES (?, ?, 'started', {NOW}) ON CONFLICT (key) DO NOTHING",
                    (key, job_id),
                ).rowcount
                == 1
            )
            record = _effect(conn.execute("SELECT * FROM effects WHERE key = ?", (key,)).fetchone())
            live = False
            if not created and record.state == "started" and record.job_id != job_id:
                live = (
                    conn.execute(
                        "SELECT 1 FROM jobs WHERE id = ? AND state = 'processing'"
                        f" AND lease_expires_at > {NOW}",
                        (record.job_id,),
                    ).fetchone()
                    is not None
                )
            return EffectStart(record, created, live)

        return await self._db.run(run)

    async def record_effect(self, key: str, result: Any) -> EffectRecord:
        def run(conn: sqlite3.Connection) -> EffectRecord:
            conn.execute(
                "INSERT INTO effects (key, job_id, state, result, created_at, recorded_at)"
                f" VALUES (?, NULL, 'recorded', ?, {NOW}, {NOW})"
                " ON CONFLICT (key) DO UPDATE SET state = 'recorded', result = excluded.result,"
                " recorded_at = excluded.recorded_at WHERE effects.state = 'started'",
                (key, json.dumps(result)),
            )
            return _effect(conn.execute("SELECT * FROM effects WHERE key = ?", (key,)).fetchone())

        return await self._db.run(run)

    # -- reading --------------------------------------------------------------------
    async def get_delivery(self, ref: str, source: str | None = None) -> DeliveryView | None:
        def run(conn: sqlite3.Connection) -> DeliveryView | None:
            row = conn.execute(
                f"SELECT {_DELIVERY_COLUMNS} FROM deliveries d"
                " WHERE d.id = :ref OR (d.event_id = :ref AND (:source IS NULL"
                " OR d.source = :source))"
                " ORDER BY (d.id = :ref) DESC, d.first_seen_at DESC LIMIT 1",
                {"ref": ref, "source": source},
            ).fetchone()
            if row is None:
                return None
            jobs = conn.execute(
                "SELECT id, action, state, attempts, max_attempts, last_error, next_attempt_at,"
                " lease_expires_at, business_id, created_at, updated_at"
                " FROM jobs WHERE delivery_id = ? ORDER BY action",
                (row["id"],),
            ).fetchall()
            return _delivery(row, jobs=tuple(_job(j) for j in jobs))

        return await self._db.run(run)

    async def list_deliveries(
        self,
        *,
        status: DeliveryStatus | None = None,
        source: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[DeliveryView]:
        def run(conn: sqlite3.Connection) -> list[DeliveryView]:
            rows = conn.execute(
                f"SELECT {_DELIVERY_COLUMNS}, {_STATUS} AS status,"
                " (SELECT group_concat(state) FROM (SELECT state FROM jobs j"
                "  WHERE j.delivery_id = d.id ORDER BY action)) AS states"
                " FROM deliveries d"
                " WHERE (:source IS NULL OR d.source = :source)"
                " AND (:before IS NULL OR d.id < :before)"
                f" AND (:status IS NULL OR {_STATUS} = :status)"
                " ORDER BY d.id DESC LIMIT :limit",
                {"source": source, "before": before, "status": status, "limit": limit},
            ).fetchall()
            return [
                _delivery(r, job_states=tuple(r["states"].split(",")) if r["states"] else ())
                for r in rows
            ]

        return await self._db.run(run)

    async def list_attempts(self, job_id: str) -> list[AttemptView]:
        def run(conn: sqlite3.Connection) -> list[AttemptView]:
            rows = conn.execute(
                "SELECT number, trigger, worker, started_at, ended_at, outcome, error_code"
                " FROM attempts WHERE job_id = ? ORDER BY id",
                (job_id,),
            ).fetchall()
            return [
                AttemptView(
                    number=r["number"],
                    trigger=r["trigger"],
                    worker=r["worker"],
                    started_at=_time(r["started_at"]),  # type: ignore[arg-type]
                    ended_at=_time(r["ended_at"]),
                    outcome=r["outcome"],
                    error_code=r["error_code"],
                )
                for r in rows
            ]

        return await self._db.run(run)

    async def count_rows(self) -> dict[str, int]:
        def run(conn: sqlite3.Connection) -> dict[str, int]:
            return {
                table: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
                for table in ("deliveries", "jobs", "payloads", "effects", "attempts")
            }

        return await self._db.run(run)


def _time(value: float | None) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if value is not None else None


def _effect(row: sqlite3.Row) -> EffectRecord:
    return EffectRecord(
        key=row["key"],
        state=row["state"],
        job_id=row["job_id"],
        result=json.loads(row["result"]) if row["result"] is not None else None,
        created_at=_time(row["created_at"]),  # type: ignore[arg-type]
        recorded_at=_time(row["recorded_at"]),
    )


def _job(row: sqlite3.Row) -> JobView:
    return JobView(
        id=row["id"],
        action=row["action"],
        state=row["state"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        last_error=row["last_error"],
        next_attempt_at=_time(row["next_attempt_at"]),
        lease_expires_at=_time(row["lease_expires_at"]),
        business_id=row["business_id"],
        created_at=_time(row["created_at"]),  # type: ignore[arg-type]
        updated_at=_time(row["updated_at"]),  # type: ignore[arg-type]
    )


def _delivery(row: sqlite3.Row, **extra: Any) -> DeliveryView:
    return DeliveryView(
        id=row["id"],
        source=row["source"],
        event_id=row["event_id"],
        event_type=row["event_type"],
        body_sha256=row["body_sha256"],
        first_seen_at=_time(row["first_seen_at"]),  # type: ignore[arg-type]
        last_seen_at=_time(row["last_seen_at"]),  # type: ignore[arg-type]
        delivery_count=row["delivery_count"],
        conflicts=row["conflicts"],
        payload_retained=bool(row["payload_retained"]),
        **extra,
    )
