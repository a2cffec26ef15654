"""Mode ``growth``'s old journal: N million rows made in bulk by SQL, straight into the
tables ``hookinbox migrate`` created, as a store that has run for a month would hold them.

Per old delivery (row ``i`` of ``n``, oldest first):

- ``deliveries``: source ``bench``, an event id whose leading digits are a hash of ``i``
  (``msg_<8 hashed hex>_<8 hex of i>``: unique, spread over the dedup index like real
  provider ids, and in the same key space as the ids mode growth sends, each of which
  starts with 8 random hex digits: a new id lands anywhere in the index, not at its
  end), one of five event types, ``first_seen_at``: the rows without a payload spread
  evenly from 30 days ago to 7 days ago, the newest ``payloads`` rows (those that keep
  their body) evenly over the last 7 days (ending 10 minutes ago): a store with a
  7-day payload retention, whose bodies a payload search reads. The time-ordered
  delivery id (``dlv_`` + 12 hex digits of those milliseconds + 20 of ``i``), one
  delivery in 20 seen twice;
- one ``jobs`` row (one route), ``completed`` 50 ms after receipt; one job in 33 needed a
  second attempt 30 s later;
- ``attempts``: one per attempt (``retry`` / ``http_503``, then ``completed``);
- ``payloads``: only the newest ``payloads`` deliveries still hold their ~300-byte body
  (a store whose older payloads a daily purge already dropped; their journal rows carry
  ``payload_purged_at``). Every job completed, so ``hookinbox purge --older-than 29d``
  retires the oldest day of the journal (its jobs and attempts with it).

PostgreSQL: the payloads' day partitions of the filled days made first (each day's
payloads in its partition, as a store that ran for a month holds them), then
``INSERT ... SELECT FROM generate_series`` per table per chunk of 500,000,
with ``session_replication_role = replica`` (the foreign-key triggers off: the rows are
consistent by construction). The four tables' secondary indexes and the dedup key's
unique constraint are dropped first and built again after the fill (a sorted build, in
parallel, instead of millions of random inserts into indexes larger than
``shared_buffers``: what makes 20 million rows a matter of minutes; the primary keys,
which the foreign keys need, stay and take the time-ordered ids at their right edge).
Then ``VACUUM ANALYZE`` (this server runs with autovacuum off; a long-running store
would have been vacuumed) and ``CHECKPOINT``, so the measurement does not pay for the
fill's dirty pages, and the dedup key read into ``shared_buffers`` (``pg_prewarm``, as
far as they hold it: a running store holds the leaves its receives touched). SQLite:
the same rows from a recursive CTE per chunk, one transaction each, ``synchronous = OFF``
for the fill, then a ``wal_checkpoint(TRUNCATE)``.
"""

from __future__ import annotations

import asyncio
import datetime
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from harness import HookinboxStore, log, pg_dsn

DAY_MS = 86_400_000
#: The newest rows, those that keep their payload, span this many days.
BODY_DAYS = 7
CHUNK = 500_000
EVENT_TYPES = (
    "invoice.paid",
    "customer.updated",
    "charge.succeeded",
    "invoice.created",
    "payment_intent.succeeded",
)


@dataclass(frozen=True)
class FillPlan:
    """``rows`` old deliveries, the newest ``payloads`` of them with a payload."""

    rows: int
    payloads: int
    #: Unix milliseconds of row 0, and the step between the rows without a payload
    #: (30 days ago to 7 days ago).
    base_ms: int
    step_ms: float
    #: Unix milliseconds of the first row with a payload, and the step between those rows
    #: (the last 7 days, ending 10 minutes ago).
    body_base_ms: int
    body_step_ms: float

    @classmethod
    def last_thirty_days(cls, rows: int, payloads: int) -> FillPlan:
        now_ms = int(time.time() * 1000)
        payloads = min(payloads, rows)
        old = max(rows - payloads, 1)
        body_base = now_ms - BODY_DAYS * DAY_MS + 10 * 60_000
        body_span = BODY_DAYS * DAY_MS - 20 * 60_000
        return cls(
            rows,
            payloads,
            now_ms - 30 * DAY_MS,
            (30 - BODY_DAYS) * DAY_MS / old,
            body_base,
            body_span / max(payloads, 1),
        )

    def rows_older_than(self, days: float) -> int:
        """How many of the rows were first seen more than ``days`` ago (when filled)."""
        cutoff = self.base_ms + (30 - days) * DAY_MS
        if cutoff <= self.base_ms:
            return 0
        old = self.rows - self.payloads
        return min(old, int((cutoff - self.base_ms) / self.step_ms) + 1)


@dataclass
class FillResult:
    rows: int
    payloads: int
    attempts: int
    seconds: float
    #: Seconds of VACUUM ANALYZE + CHECKPOINT (PostgreSQL) or the WAL checkpoint (SQLite).
    settle_seconds: float
    store_bytes: int


# ---------------------------------------------------------------- PostgreSQL

# $1 = first i, $2 = last i (inclusive), $3 = base_ms, $4 = step_ms, $5 = first i with a
# payload, $6 = its ms, $7 = the step between rows with a payload
_PG_ROW = """
    SELECT i,
           CASE WHEN i < $5::bigint THEN $3::bigint + (i * $4::float8)::bigint
                ELSE $6::bigint + ((i - $5::bigint) * $7::float8)::bigint END AS ms
    FROM generate_series($1::bigint, $2::bigint) AS i
"""
_PG_ID = "'dlv_' || lpad(to_hex(ms), 12, '0') || lpad(to_hex(i), 20, '0')"
_PG_T = "to_timestamp(ms / 1000.0)"
_PG_EVENT = (
    "'msg_' || lpad(to_hex((i * 2654435761) % 4294967296), 8, '0')"
    " || '_' || lpad(to_hex(i), 8, '0')"
)
_PG_TYPES = "(ARRAY[" + ",".join(f"'{t}'" for t in EVENT_TYPES) + "])[1 + i % 5]"

PG_DELIVERIES = f"""
INSERT INTO deliveries (id, source, event_id, event_type, body_sha256, first_seen_at,
                        last_seen_at, delivery_count, payload_purged_at)
SELECT {_PG_ID}, 'bench', {_PG_EVENT}, {_PG_TYPES},
       md5(i::text) || md5((i + 7)::text), {_PG_T},
       {_PG_T} + CASE WHEN i % 20 = 0 THEN interval '40 seconds' ELSE interval '0' END,
       CASE WHEN i % 20 = 0 THEN 2 ELSE 1 END,
       CASE WHEN i < $5::bigint THEN {_PG_T} + interval '1 day' END
FROM ({_PG_ROW}) AS r
"""
_PG_DONE = "CASE WHEN i % 33 = 0 THEN interval '30.05 seconds' ELSE interval '0.05 seconds' END"
PG_JOBS = f"""
INSERT INTO jobs (id, delivery_id, source, action, state, attempts, max_attempts,
                  next_attempt_at, trigger, created_at, updated_at, completed_at)
SELECT {_PG_ID} || ':noop', {_PG_ID}, 'bench', 'noop', 'completed',
       CASE WHEN i % 33 = 0 THEN 2 ELSE 1 END, 8, {_PG_T}, 'delivery', {_PG_T},
       {_PG_T} + {_PG_DONE}, {_PG_T} + {_PG_DONE}
FROM ({_PG_ROW}) AS r
"""
PG_ATTEMPTS = f"""
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome, error_code)
SELECT {_PG_ID} || ':noop', a.number, 'delivery', 'bench-growth',
       {_PG_T} + (a.number - 1) * interval '30 seconds' + interval '0.01 seconds',
       {_PG_T} + (a.number - 1) * interval '30 seconds' + interval '0.05 seconds',
       CASE WHEN a.number = 1 AND i % 33 = 0 THEN 'retry' ELSE 'completed' END,
       CASE WHEN a.number = 1 AND i % 33 = 0 THEN 'http_503' END
FROM ({_PG_ROW}) AS r
CROSS JOIN LATERAL (SELECT generate_series(1, CASE WHEN i % 33 = 0 THEN 2 ELSE 1 END)) AS a(number)
"""
_PG_BODY = (
    """'{"type":"' || """
    + _PG_TYPES
    + """ || '","id":"' || """
    + _PG_EVENT
    + """ || '","data":{"object":"invoice","amount_paid":' || (1000 + i % 9000)"""
    + """ || ',"currency":"usd","customer":"cus_' || lpad((i % 1000)::text, 6, '0')"""
    + """ || '","lines":[{"price":"price_basic","quantity":1}],"metadata":{"order":"ord_'"""
    + """ || lpad(i::text, 9, '0') || '","tenant":"t_bench"}}}'"""
)
PG_PAYLOADS = f"""
INSERT INTO payloads (delivery_id, body, headers)
SELECT {_PG_ID}, convert_to({_PG_BODY}, 'UTF8'),
       '{{"content-type":"application/json","webhook-id":"' || {_PG_EVENT} || '"}}'
FROM ({_PG_ROW}) AS r
WHERE i >= $5::bigint
"""
TABLES = ("deliveries", "payloads", "jobs", "attempts")


#: The indexes a fill drops and builds again: every index of the four tables but the
#: primary keys (the foreign keys need them); a unique constraint is dropped and added
#: back as a constraint.
_PG_REBUILT = """
SELECT i.indrelid::regclass::text AS tbl, i.indexrelid::regclass::text AS name,
       pg_get_indexdef(i.indexrelid) AS indexdef, c.conname,
       pg_get_constraintdef(c.oid) AS condef
FROM pg_index i
LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.contype = 'u'
WHERE i.indrelid = ANY($1::regclass[]) AND NOT i.indisprimary
  AND NOT EXISTS (SELECT 1 FROM pg_constraint f WHERE f.contype = 'f'
                  AND f.conindid = i.indexrelid)
ORDER BY 1, 2
"""


async def _drop_indexes(conn: asyncpg.Connection) -> list[str]:
    """Drop the fill's rebuilt indexes; the statements that make them again."""
    found = await conn.fetch(_PG_REBUILT, list(TABLES))
    again = []
    for row in found:
        table, name = row["tbl"], row["conname"]
        if name:
            await conn.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
            again.append(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {row["condef"]}')
        else:
            await conn.execute(f"DROP INDEX {row['name']}")
            # A partitioned table's index is defined ON ONLY the parent: made again so, its
            # partitions would have none.
            again.append(row["indexdef"].replace(" ON ONLY ", " ON ", 1))
    return again


async def _session(db: str) -> asyncpg.Connection:
    conn = await asyncpg.connect(pg_dsn(db), timeout=10, command_timeout=None)
    await conn.execute("SET session_replication_role = replica")
    await conn.execute("SET synchronous_commit = off")
    await conn.execute("SET maintenance_work_mem = '512MB'")
    return conn


async def _fill_pg(db: str, plan: FillPlan, say: Callable[[str], None]) -> FillResult:
    # Two sessions, one per pair of tables, so the fill uses both cores of this machine
    # (no foreign-key triggers: neither waits for the other's rows).
    conn, other = await _session(db), await _session(db)
    first_payload = plan.rows - plan.payloads

    async def chunk(
        session: asyncpg.Connection, statements: tuple[str, ...], args: tuple[object, ...]
    ) -> None:
        async with session.transaction():
            for statement in statements:
                await session.execute(statement, *args)

    try:
        t0 = time.monotonic()
        # The payloads', attempts' and jobs' day partitions (migrations 019, 027, 028) of
        # the days filled: otherwise their rows land in DEFAULT, which holds only the rows
        # kept past their day.
        first_day = time.gmtime(plan.base_ms / 1000)
        for ahead in (
            "hookinbox_payload_partitions_ahead",
            "hookinbox_attempt_partitions_ahead",
            "hookinbox_job_partitions_ahead",
        ):
            await conn.execute(
                f"SELECT {ahead}($1::date, (now() AT TIME ZONE 'UTC')::date)",
                datetime.date(first_day.tm_year, first_day.tm_mon, first_day.tm_mday),
            )
        again = await _drop_indexes(conn)
        say(f"{len(again)} indexes dropped for the fill")
        for lo in range(0, plan.rows, CHUNK):
            hi = min(lo + CHUNK, plan.rows) - 1
            args = (
                lo,
                hi,
                plan.base_ms,
                plan.step_ms,
                first_payload,
                plan.body_base_ms,
                plan.body_step_ms,
            )
            journal = (PG_DELIVERIES, PG_PAYLOADS) if hi >= first_payload else (PG_DELIVERIES,)
            await asyncio.gather(
                chunk(conn, journal, args), chunk(other, (PG_JOBS, PG_ATTEMPTS), args)
            )
            say(f"{hi + 1:,}/{plan.rows:,} rows, {time.monotonic() - t0:.0f} s")
        t_idx = time.monotonic()

        # Two builds at a time, one per session (each may also use parallel workers),
        # each its own transaction: a session holds one table's lock at a time.
        async def build(session: asyncpg.Connection, statements: list[str]) -> None:
            for statement in statements:
                await session.execute(statement)

        await asyncio.gather(build(conn, again[0::2]), build(other, again[1::2]))
        say(f"{len(again)} indexes built again in {time.monotonic() - t_idx:.0f} s")
        filled = time.monotonic() - t0
        t1 = time.monotonic()
        await conn.execute("VACUUM ANALYZE " + ", ".join(TABLES))
        await conn.execute("CHECKPOINT")
        await _prewarm_dedup_key(conn, say)
        settle = time.monotonic() - t1
        attempts = int(await conn.fetchval("SELECT count(*) FROM attempts"))
        size = int(await conn.fetchval("SELECT pg_database_size(current_database())"))
    finally:
        await conn.close()
        await other.close()
    return FillResult(plan.rows, plan.payloads, attempts, filled, settle, size)


async def _prewarm_dedup_key(conn: asyncpg.Connection, say: Callable[[str], None]) -> None:
    """Read the dedup key into ``shared_buffers``, as far as they hold it. A sorted build
    writes the index past the buffers, so without this every leaf a receive touched
    first was read from the operating system's cache (16% of the backends' CPU at 20 M
    rows on a cluster with 6 GB of buffers, perf); a store that has been receiving for a
    month holds the leaves its receives touched. The other indexes of the receive path
    take new entries at their right edge, a few pages."""
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        pages = await conn.fetchval("SELECT pg_prewarm('deliveries_source_event_id_key')")
    except asyncpg.PostgresError as exc:
        say(f"dedup key not prewarmed ({type(exc).__name__}): the first runs read it")
        return
    say(f"dedup key prewarmed: {pages:,} pages read into shared_buffers")


# ---------------------------------------------------------------- SQLite

# :lo, :hi (inclusive), :base, :step, :first_payload, :body_base, :body_step; SQLite's printf
# formats 64-bit integers.
_SQ_ROWS = """
WITH RECURSIVE s(i) AS (SELECT :lo UNION ALL SELECT i + 1 FROM s WHERE i < :hi),
r(i, ms) AS (SELECT i, CASE WHEN i < :first_payload THEN :base + CAST(i * :step AS INTEGER)
             ELSE :body_base + CAST((i - :first_payload) * :body_step AS INTEGER) END FROM s)
"""
_SQ_ID = "printf('dlv_%012x%020x', ms, i)"
_SQ_T = "(ms / 1000.0)"
_SQ_EVENT = "printf('msg_%08x_%08x', (i * 2654435761) % 4294967296, i)"
_SQ_TYPES = (
    "CASE i % 5 " + " ".join(f"WHEN {n} THEN '{t}'" for n, t in enumerate(EVENT_TYPES)) + " END"
)
SQ_DELIVERIES = f"""
INSERT INTO deliveries (id, source, event_id, event_type, body_sha256, first_seen_at,
                        last_seen_at, delivery_count, payload_purged_at)
{_SQ_ROWS}
SELECT {_SQ_ID}, 'bench', {_SQ_EVENT}, {_SQ_TYPES}, lower(hex(randomblob(32))), {_SQ_T},
       {_SQ_T} + CASE WHEN i % 20 = 0 THEN 40 ELSE 0 END,
       CASE WHEN i % 20 = 0 THEN 2 ELSE 1 END,
       CASE WHEN i < :first_payload THEN {_SQ_T} + 86400 END
FROM r
"""
SQ_JOBS = f"""
INSERT INTO jobs (id, delivery_id, source, action, state, attempts, max_attempts,
                  next_attempt_at, trigger, created_at, updated_at, completed_at)
{_SQ_ROWS}
SELECT {_SQ_ID} || ':noop', {_SQ_ID}, 'bench', 'noop', 'completed',
       CASE WHEN i % 33 = 0 THEN 2 ELSE 1 END, 8, {_SQ_T}, 'delivery', {_SQ_T},
       {_SQ_T} + CASE WHEN i % 33 = 0 THEN 30.05 ELSE 0.05 END,
       {_SQ_T} + CASE WHEN i % 33 = 0 THEN 30.05 ELSE 0.05 END
FROM r
"""
SQ_ATTEMPTS = f"""
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome, error_code)
{_SQ_ROWS}, n(number) AS (VALUES (1), (2))
SELECT {_SQ_ID} || ':noop', n.number, 'delivery', 'bench-growth',
       {_SQ_T} + (n.number - 1) * 30 + 0.01, {_SQ_T} + (n.number - 1) * 30 + 0.05,
       CASE WHEN n.number = 1 AND i % 33 = 0 THEN 'retry' ELSE 'completed' END,
       CASE WHEN n.number = 1 AND i % 33 = 0 THEN 'http_503' END
FROM r JOIN n ON n.number = 1 OR i % 33 = 0
ORDER BY i, n.number
"""
_SQ_BODY = (
    """'{"type":"' || """
    + _SQ_TYPES
    + """ || '","id":"' || """
    + _SQ_EVENT
    + """ || '","data":{"object":"invoice","amount_paid":' || (1000 + i % 9000)"""
    + """ || ',"currency":"usd","customer":"cus_' || printf('%06d', i % 1000)"""
    + """ || '","lines":[{"price":"price_basic","quantity":1}],"metadata":{"order":"ord_'"""
    + """ || printf('%09d', i) || '","tenant":"t_bench"}}}'"""
)
SQ_PAYLOADS = f"""
INSERT INTO payloads (delivery_id, body, headers)
{_SQ_ROWS}
SELECT {_SQ_ID}, CAST({_SQ_BODY} AS BLOB),
       '{{"content-type":"application/json","webhook-id":"' || {_SQ_EVENT} || '"}}'
FROM r WHERE i >= :first_payload
"""


def _fill_sqlite(path: Path, plan: FillPlan, say: Callable[[str], None]) -> FillResult:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    first_payload = plan.rows - plan.payloads
    try:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA cache_size = -1000000")  # 1 GB for the fill's index inserts
        t0 = time.monotonic()
        for lo in range(0, plan.rows, CHUNK):
            hi = min(lo + CHUNK, plan.rows) - 1
            args = {
                "lo": lo,
                "hi": hi,
                "base": plan.base_ms,
                "step": plan.step_ms,
                "first_payload": first_payload,
                "body_base": plan.body_base_ms,
                "body_step": plan.body_step_ms,
            }
            conn.execute("BEGIN")
            for sql in (SQ_DELIVERIES, SQ_JOBS, SQ_ATTEMPTS):
                conn.execute(sql, args)
            if hi >= first_payload:
                conn.execute(SQ_PAYLOADS, args)
            conn.execute("COMMIT")
            say(f"{hi + 1:,}/{plan.rows:,} rows, {time.monotonic() - t0:.0f} s")
        filled = time.monotonic() - t0
        t1 = time.monotonic()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        settle = time.monotonic() - t1
        attempts = int(conn.execute("SELECT count(*) FROM attempts").fetchone()[0])
    finally:
        conn.close()
    size = sum(
        Path(f"{path}{suffix}").stat().st_size
        for suffix in ("", "-wal")
        if Path(f"{path}{suffix}").exists()
    )
    return FillResult(plan.rows, plan.payloads, attempts, filled, settle, size)


def fill(store: HookinboxStore, plan: FillPlan, label: str) -> FillResult:
    """Write the plan's old journal into a migrated store; log progress per chunk."""

    def say(msg: str) -> None:
        log(f"[{label}] fill: {msg}")

    if store.kind == "pg":
        assert store.pg_db is not None
        return asyncio.run(_fill_pg(store.pg_db, plan, say))
    assert store.sqlite_path is not None
    return _fill_sqlite(store.sqlite_path, plan, say)
