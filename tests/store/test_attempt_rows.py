"""The shape of the attempts table, on both stores (issue 11, worker throughput): one row
per attempt, written once when the attempt ends, complete (its worker, its claim-time
start, its outcome and what it met); the attempt under way is read from the leased job.
These tests read the table itself on purpose: that a claim writes no row and a settle
updates none is below the store's contract, and is what they pin.
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import asyncpg

from hookinbox.store import AttemptDetail, Settlement, Store
from hookinbox.store.dialect import POSTGRES, SQLITE
from hookinbox.store.migrations import load_migrations
from hookinbox.store.sql import Sql
from tests.store.test_contract import new_delivery
from tests.support.database import PG_URL

_ROWS = Sql(
    "SELECT number, trigger, worker, started_at, ended_at, outcome, error_code, target,"
    " http_status, response_snippet, duration_ms, next_attempt_at"
    " FROM attempts WHERE job_id = :id ORDER BY id"
)


async def _rows(store: Store, job_id: str) -> list[dict[str, Any]]:
    db: Any = store._db
    found = await db.rows(_ROWS, id=job_id)
    decoded = []
    for r in found:
        row = dict(r)
        for column in ("started_at", "ended_at", "next_attempt_at"):
            row[column] = db.decode_time(row[column])
        decoded.append(row)
    return decoded


async def test_a_completed_and_a_retried_job_get_one_complete_row_per_attempt(
    store: Store,
) -> None:
    await store.journal.reserve_deliveries([new_delivery("e1"), new_delivery("e2")])
    done, retried = await store.queue.claim_due_jobs("w1", 2, 30)
    # Under way: no row; the running attempt is read from the lease.
    assert await _rows(store, done.id) == []
    (running,) = await store.queue.list_attempts(done.id)
    assert (running.number, running.worker, running.ended_at, running.outcome) == (
        1,
        "w1",
        None,
        None,
    )
    answered = AttemptDetail("example.test/hook", 200, "ok", 12)
    busy = AttemptDetail("example.test/hook", 503, "busy", 40)
    assert await store.queue.settle_jobs(
        [
            Settlement(done.id, done.lease_token, "completed", detail=answered),
            Settlement(retried.id, retried.lease_token, "retry", "http_503", 0, detail=busy),
        ]
    ) == [True, True]
    (row,) = await _rows(store, done.id)
    assert (row["number"], row["trigger"], row["worker"]) == (1, "delivery", "w1")
    assert row["started_at"] == running.started_at  # the claim's time, not the settle's
    assert row["started_at"] <= row["ended_at"]
    assert (row["outcome"], row["error_code"], row["next_attempt_at"]) == ("completed", None, None)
    assert (row["target"], row["http_status"], row["response_snippet"], row["duration_ms"]) == (
        "example.test/hook",
        200,
        "ok",
        12,
    )
    (first,) = await _rows(store, retried.id)
    assert (first["number"], first["worker"], first["outcome"], first["error_code"]) == (
        1,
        "w1",
        "retry",
        "http_503",
    )
    assert first["started_at"] <= first["ended_at"] <= first["next_attempt_at"]
    assert (first["http_status"], first["response_snippet"]) == (503, "busy")

    (again,) = await store.queue.claim_due_jobs("w2", 1, 30)
    assert again.id == retried.id and again.attempts == 2
    assert len(await _rows(store, retried.id)) == 1
    assert await store.queue.settle_jobs([Settlement(again.id, again.lease_token, "completed")])
    rows = await _rows(store, retried.id)
    assert [(r["number"], r["worker"], r["outcome"]) for r in rows] == [
        (1, "w1", "retry"),
        (2, "w2", "completed"),
    ]
    assert rows[0]["ended_at"] <= rows[1]["started_at"] <= rows[1]["ended_at"]
    # What the reads show is these rows, as they are.
    shown = await store.queue.list_attempts(retried.id)
    assert [
        (a.number, a.worker, a.started_at, a.ended_at, a.outcome, a.http_status) for a in shown
    ] == [
        (r["number"], r["worker"], r["started_at"], r["ended_at"], r["outcome"], r["http_status"])
        for r in rows
    ]


async def test_a_lapsed_lease_taken_over_writes_the_lease_expired_row_then_the_new_one(
    store: Store,
) -> None:
    await store.journal.reserve_deliveries([new_delivery("e1")])
    (job,) = await store.queue.claim_due_jobs("w1", 1, 1)
    (claimed,) = await store.queue.list_attempts(job.id)
    await asyncio.sleep(1.2)  # w1 died: its lease lapses, its attempt still shows running
    (lapsed,) = await store.queue.list_attempts(job.id)
    assert lapsed == claimed and (lapsed.worker, lapsed.ended_at) == ("w1", None)
    assert await _rows(store, job.id) == []

    (taken,) = await store.queue.claim_due_jobs("w2", 1, 30)
    assert (taken.id, taken.attempts) == (job.id, 2)
    (expired,) = await _rows(store, job.id)
    assert (expired["number"], expired["worker"], expired["outcome"], expired["error_code"]) == (
        1,
        "w1",
        "lease_expired",
        "lease_expired",
    )
    assert expired["started_at"] == claimed.started_at <= expired["ended_at"]
    history = await store.queue.list_attempts(job.id)
    assert [(a.number, a.worker, a.outcome, a.ended_at is None) for a in history] == [
        (1, "w1", "lease_expired", False),
        (2, "w2", None, True),
    ]
    # The stale worker's settle is refused and writes nothing.
    assert await store.queue.settle_jobs([Settlement(job.id, job.lease_token, "completed")]) == [
        False
    ]
    assert len(await _rows(store, job.id)) == 1
    assert await store.queue.settle_jobs([Settlement(taken.id, taken.lease_token, "completed")])
    rows = await _rows(store, job.id)
    assert [(r["number"], r["worker"], r["outcome"]) for r in rows] == [
        (1, "w1", "lease_expired"),
        (2, "w2", "completed"),
    ]
    assert rows[1]["started_at"] == history[1].started_at <= rows[1]["ended_at"]


async def test_a_lease_lapsed_on_the_last_attempt_is_written_by_the_sweep(store: Store) -> None:
    item = new_delivery("e1")
    await store.journal.reserve_deliveries([item])
    for _ in range(item.max_attempts):
        (job,) = await store.queue.claim_due_jobs("w", 1, 1)
        await asyncio.sleep(1.1)
    assert len(await _rows(store, job.id)) == item.max_attempts - 1
    assert await store.queue.fail_exhausted_leases() == 1
    assert await store.queue.fail_exhausted_leases() == 0  # written once
    rows = await _rows(store, job.id)
    assert [(r["number"], r["worker"], r["outcome"]) for r in rows] == [
        (n, "w", "lease_expired") for n in range(1, item.max_attempts + 1)
    ]
    assert all(r["started_at"] <= r["ended_at"] for r in rows)
    detail = await store.queue.get_job(job.id)
    assert detail is not None and (detail.state, detail.last_error) == ("failed", "lease_expired")


_BEFORE_010 = [
    "INSERT INTO deliveries (id, source, event_id, event_type, body_sha256, delivery_count,"
    " first_seen_at, last_seen_at) VALUES ('d1', 's', 'e1', 't', 'x', 1, {t0}, {t0})",
    # Leased across the upgrade: its attempt is open.
    "INSERT INTO jobs (id, delivery_id, source, action, state, attempts, max_attempts,"
    " next_attempt_at, lease_token, leased_by, lease_expires_at, created_at, updated_at)"
    " VALUES ('d1:a', 'd1', 's', 'a', 'processing', 2, 3, {t0}, 'tok', 'w-old', {t3}, {t0},"
    " {t2})",
    "INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,"
    " error_code) VALUES ('d1:a', 1, 'delivery', 'w-old', {t0}, {t1}, 'retry', 'boom')",
    "INSERT INTO attempts (job_id, number, trigger, worker, started_at)"
    " VALUES ('d1:a', 2, 'delivery', 'w-old', {t2})",
]
_AFTER_010 = (
    "SELECT (SELECT leased_at FROM jobs WHERE id = 'd1:a') AS leased_at,"
    " (SELECT count(*) FROM attempts WHERE ended_at IS NULL) AS still_open,"
    " (SELECT count(*) FROM attempts) AS kept"
)


async def test_migration_010_moves_an_attempt_left_open_onto_its_leased_job(
    backend: str, db_url: str
) -> None:
    """A job leased while the store is upgraded: its open attempt's start becomes the
    job's ``leased_at`` and the open row goes (its settle writes it, ended); the ended
    attempts stay."""
    if backend == "sqlite":
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        times = {f"t{i}": str(100.0 + i) for i in range(4)}
        for migration in load_migrations("hookinbox.store.sqlite", SQLITE):
            if migration.version == 10:
                for statement in _BEFORE_010:
                    conn.execute(statement.format(**times))
            conn.executescript(migration.sql)
        leased_at, still_open, kept = conn.execute(_AFTER_010).fetchone()
        conn.close()
        assert leased_at == 102.0
    else:
        pg = await asyncpg.connect(db_url)
        try:
            times = {f"t{i}": f"to_timestamp({100 + i})" for i in range(4)}
            for migration in load_migrations("hookinbox.store.postgres", POSTGRES):
                if migration.version == 10:
                    for statement in _BEFORE_010:
                        await pg.execute(statement.format(**times))
                await pg.execute(migration.sql)
            leased_at, still_open, kept = await pg.fetchrow(_AFTER_010)
        finally:
            await pg.close()
        assert leased_at.timestamp() == 102.0
    assert (still_open, kept) == (0, 1)


async def test_purged_deliveries_take_their_jobs_attempts_with_them(store: Store) -> None:
    """Attempts go with their job (PostgreSQL: a trigger, migration 012, where the foreign
    key's cascade did it; SQLite: the key's cascade), and only theirs."""
    await store.journal.reserve_deliveries([new_delivery(f"e{i}") for i in range(3)])
    jobs = await store.queue.claim_due_jobs("w", 3, 30)
    await store.queue.settle_jobs([Settlement(j.id, j.lease_token, "retry", "x", 0) for j in jobs])
    again = await store.queue.claim_due_jobs("w", 3, 30)
    await store.queue.settle_jobs([Settlement(j.id, j.lease_token, "completed") for j in again])
    assert (await store.count_rows())["attempts"] == 6
    await asyncio.sleep(0.01)
    assert await store.retention.purge_deliveries(0, 2) == 2
    rows = await store.count_rows()
    assert (rows["deliveries"], rows["jobs"], rows["attempts"]) == (1, 1, 2)
    (kept,) = [j for j in jobs if await store.queue.get_job(j.id) is not None]
    assert [a.outcome for a in await store.queue.list_attempts(kept.id)] == ["retry", "completed"]


async def test_a_job_that_is_gone_gets_no_attempt_row(store: Store) -> None:
    """Every attempt row is written from its job's row (on PostgreSQL no foreign key
    checks it since migration 012): a settle or a sweep of a job that is gone writes
    nothing."""
    await store.journal.reserve_deliveries([new_delivery("e1")])
    (job,) = await store.queue.claim_due_jobs("w", 1, 30)
    db: Any = store._db
    await db.count(Sql("DELETE FROM jobs WHERE id = :id"), id=job.id)
    assert await store.queue.settle_jobs([Settlement(job.id, job.lease_token, "completed")]) == [
        False
    ]
    assert await store.queue.fail_exhausted_leases() == 0
    assert (await store.count_rows())["attempts"] == 0


async def test_a_job_deleted_from_a_session_naming_the_schema_takes_its_own_attempts(
    backend: str, db_url: str, store: Store
) -> None:
    """PostgreSQL's trigger (migration 012) keeps the search path the store was migrated
    with: an operator's ``DELETE FROM schema.jobs`` from a session on the default search
    path still removes that store's attempts."""
    if backend == "sqlite":
        return  # one file, one schema: SQLite's cascade is the key's own
    await store.journal.reserve_deliveries([new_delivery("e1")])
    (job,) = await store.queue.claim_due_jobs("w", 1, 30)
    await store.queue.settle_jobs([Settlement(job.id, job.lease_token, "completed")])
    schema = db_url.rsplit("search_path=", 1)[1]
    pg = await asyncpg.connect(PG_URL)  # search path: the server's default
    try:
        await pg.execute(f"DELETE FROM {schema}.jobs WHERE id = $1", job.id)
        left = await pg.fetchval(f"SELECT count(*) FROM {schema}.attempts")
    finally:
        await pg.close()
    assert left == 0


async def test_a_journal_row_deleted_from_a_session_naming_the_schema_takes_its_jobs_and_attempts(
    backend: str, db_url: str, store: Store
) -> None:
    """On PostgreSQL a trigger (migration 025) deletes a journal row's jobs, as the foreign
    key's cascade did, keeping the search path the store was migrated with: an operator's
    ``DELETE FROM schema.deliveries`` removes that delivery's jobs and attempts, and only
    its own."""
    if backend == "sqlite":
        return  # one file, one schema: SQLite's cascade is the key's own
    await store.journal.reserve_deliveries([new_delivery("e1"), new_delivery("e2")])
    jobs = await store.queue.claim_due_jobs("w", 2, 30)
    await store.queue.settle_jobs([Settlement(j.id, j.lease_token, "completed") for j in jobs])
    gone = jobs[0]
    schema = db_url.rsplit("search_path=", 1)[1]
    pg = await asyncpg.connect(PG_URL)  # search path: the server's default
    try:
        find = f"SELECT delivery_id FROM {schema}.jobs WHERE id = $1"
        delivery = await pg.fetchval(find, gone.id)
        await pg.execute(f"DELETE FROM {schema}.deliveries WHERE id = $1", delivery)
        left = await pg.fetch(
            f"SELECT j.id, (SELECT count(*) FROM {schema}.attempts a WHERE a.job_id = j.id) AS n"
            f" FROM {schema}.jobs j"
        )
    finally:
        await pg.close()
    assert [(r["id"], r["n"]) for r in left] == [(jobs[1].id, 1)]


async def test_a_purge_batch_deletes_the_children_of_its_rows_in_one_call_per_table(
    backend: str, db_url: str, store: Store
) -> None:
    """On PostgreSQL the cascades run once per DELETE statement over the rows it deleted
    (migration 026), not once per row: a purge batch of many journal rows calls each
    cascade function once and still takes every child of those rows, and none of the
    rows it kept."""
    if backend == "sqlite":
        return  # SQLite's cascades are its keys' own
    await store.journal.reserve_deliveries([new_delivery(f"e{i}") for i in range(12)])
    jobs = await store.queue.claim_due_jobs("w", 12, 30)
    await store.queue.settle_jobs([Settlement(j.id, j.lease_token, "completed") for j in jobs])
    schema = db_url.rsplit("search_path=", 1)[1]
    pg = await asyncpg.connect(PG_URL)
    try:
        await pg.execute("SET track_functions = 'pl'")
        ids = [r["id"] for r in await pg.fetch(f"SELECT id FROM {schema}.deliveries ORDER BY id")]
        async with pg.transaction():
            await pg.execute(f"DELETE FROM {schema}.deliveries WHERE id = ANY($1)", ids[:10])
            calls = {
                r["funcname"]: r["calls"]
                for r in await pg.fetch(
                    "SELECT funcname, calls FROM pg_stat_xact_user_functions WHERE schemaname = $1",
                    schema,
                )
            }
        left = {
            table: await pg.fetchval(f"SELECT count(*) FROM {schema}.{table}")
            for table in ("deliveries", "payloads", "jobs", "attempts")
        }
    finally:
        await pg.close()
    assert calls == {
        "hookinbox_delete_deliveries_jobs": 1,
        "hookinbox_delete_deliveries_payloads": 1,
        "hookinbox_delete_jobs_rows": 1,
    }
    assert left == {"deliveries": 2, "payloads": 2, "jobs": 2, "attempts": 2}


async def test_a_reserve_locks_none_of_the_journal_rows_it_writes(
    backend: str, store: Store
) -> None:
    """A job is written only by the reserve, beside its journal row, so nothing checks the
    row again: on PostgreSQL no foreign-key check takes a ``FOR KEY SHARE`` lock on it
    (which would write its ``xmax`` and a WAL record per delivery)."""
    if backend == "sqlite":
        return  # no row locks
    await store.journal.reserve_deliveries([new_delivery(f"e{i}") for i in range(5)])
    db: Any = store._db
    found = await db.rows(Sql("SELECT xmax::text AS xmax FROM deliveries"))
    assert len(found) == 5
    assert {r["xmax"] for r in found} == {"0"}
