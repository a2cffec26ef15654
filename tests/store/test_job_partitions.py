"""PostgreSQL's jobs partitioned by UTC day of their id (migration 028): a day retires
whole with its unfinished and dead-lettered jobs kept in DEFAULT (their parked rows and
ledger rows with them), the worker's statements leave the days of finished jobs out of
their plans, and an existing store converts in place while it receives and settles."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from hookinbox import ops
from hookinbox.errors import StoreError
from hookinbox.ids import delivery_id_floor
from hookinbox.store import Store, open_store_for
from hookinbox.store.dialect import POSTGRES
from hookinbox.store.hot_path import LEASE_EXPIRED, order_horizon
from hookinbox.store.hot_path_postgres import FLOOR_REFRESH, day_floor
from hookinbox.store.sql import pinned
from hookinbox.store.statements import load_postgres_statements
from tests.store.test_partitions import ACTOR, DAY, _migrated_up_to
from tests.support.database import pg_session
from tests.support.inbox import make_config
from tests.support.journal import add_delivery, id_at, settle_all


def _days_ago(days: int) -> datetime:
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight - timedelta(days=days) + timedelta(hours=12)


async def _jobs_days_ago(store: Store, days: int = 3) -> dict[str, str]:
    """Jobs of ``days`` ago: one completed, one dead-lettered, one still accepted; by name,
    their job ids."""
    noon = _days_ago(days)
    assert await store.partitions.create_ahead(7, today=noon.date() - timedelta(days=1)) >= 2
    made = {}
    for n, (name, state) in enumerate(
        (("done", "completed"), ("dead", "failed"), ("waiting", None))
    ):
        delivery_id = await add_delivery(store, f"evt_{name}", delivery_id=id_at(noon, n))
        made[name] = f"{delivery_id}:count"
        if state is not None:
            await settle_all(store, state)
    return made


async def _place(conn: asyncpg.Connection, job_id: str) -> str | None:
    """The partition holding the job (None: gone)."""
    found = await conn.fetchval("SELECT tableoid::regclass::text FROM jobs WHERE id = $1", job_id)
    return None if found is None else str(found).rsplit(".", 1)[-1]


async def test_a_day_of_jobs_past_the_key_retention_retires_keeping_unfinished_and_dead_letters(
    pg_store: Store, pg_url: str
) -> None:
    made = await _jobs_days_ago(pg_store)
    day = "jobs_p" + _days_ago(3).strftime("%Y%m%d")
    async with pg_session(pg_url) as conn:
        assert {await _place(conn, j) for j in made.values()} == {day}
        # The waiting job waits for a resource (parked), and the completed one left its
        # parked row behind; the finished ones made effects.
        for name in ("waiting", "done"):
            await conn.execute(
                "INSERT INTO parked_events (job_id, source, kind, provider_ref, deadline)"
                " VALUES ($1, 'test', 'video', 'vid_1', now() + interval '1 day')",
                made[name],
            )
        for name in ("done", "dead"):
            await conn.execute(
                "INSERT INTO effects (key, job_id, state) VALUES ($1, $2, 'recorded')",
                f"refund:{name}",
                made[name],
            )
            await conn.execute(
                "INSERT INTO effects_superseded (key, job_id, state, created_at, superseded_by)"
                " VALUES ($1, $2, 'recorded', now(), 'op')",
                f"refund:{name}",
                made[name],
            )

    # Retention 0 stands for the key retention passed: the day goes whole; the dead letter
    # and the job still due move to DEFAULT, the completed one goes with its ledger rows.
    await pg_store.partitions.retire(0, table="attempts")
    retired = await pg_store.partitions.retire(0, table="jobs")
    mine = next(each for each in retired if each.name == day)
    assert (mine.table, mine.retired, mine.rows, mine.held) == ("jobs", True, 3, 2)
    assert day not in {p.name for p in await pg_store.partitions.listing()}
    async with pg_session(pg_url) as conn:
        assert await _place(conn, made["done"]) is None
        assert await _place(conn, made["dead"]) == "jobs_default"
        assert await _place(conn, made["waiting"]) == "jobs_default"
        assert await conn.fetchval("SELECT to_regclass($1)", day) is None
        for table in ("effects", "effects_superseded"):
            kept = await conn.fetch(f"SELECT job_id FROM {table} ORDER BY job_id")
            assert [r["job_id"] for r in kept] == [made["dead"]]
        parked = await conn.fetch("SELECT job_id FROM parked_events")
        assert [r["job_id"] for r in parked] == [made["waiting"]]

    # The job kept in DEFAULT is claimed (its id is days older than the floor of today's
    # jobs would be: DEFAULT is read always, and the floor counts it).
    (again,) = await pg_store.queue.claim_due_jobs("w", 10, 30)
    assert again.id == made["waiting"] and again.body is not None
    assert await pg_store.queue.complete_job(again.id, again.lease_token, "biz")

    # The journal's purge then deletes the day's journal rows whose jobs all completed (or
    # are gone); the cascade deletes the job in DEFAULT and its parked row.
    assert await pg_store.retention.purge_deliveries(0, 100) == 2
    async with pg_session(pg_url) as conn:
        assert await _place(conn, made["waiting"]) is None
        assert await conn.fetchval("SELECT count(*) FROM parked_events") == 0
        assert await _place(conn, made["dead"]) == "jobs_default"


async def _claim_locks(conn: asyncpg.Connection, floor: str, below: str = "") -> set[str]:
    """The relations a claim with ``floor`` and ``below`` written in locks, planned once
    (as a worker's are), on a session of its own; what it claimed is rolled back."""
    claim = load_postgres_statements("hot_path")["claim"]
    claim = pinned(pinned(claim, "floor", floor), "below", below)
    rendered = POSTGRES.render(claim)
    params: dict[str, Any] = {
        "limit": 10,
        "horizon": order_horizon(0),
        "token": "t",
        "worker": "w",
        "lease": 30.0,
        **LEASE_EXPIRED,
    }
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    claiming = conn.transaction()
    await claiming.start()
    try:
        await conn.fetch(rendered.text, *[params[n] for n in rendered.names])
        found = await conn.fetch(
            "SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
            " WHERE l.pid = pg_backend_pid()"
        )
    finally:
        await claiming.rollback()
        POSTGRES.forget(claim)
    return {r["relname"] for r in found}


async def test_a_claim_leaves_the_days_of_finished_jobs_out_of_its_plan(
    pg_store: Store, pg_url: str
) -> None:
    noon = _days_ago(3)
    await pg_store.partitions.create_ahead(7, today=noon.date() - timedelta(days=1))
    await add_delivery(pg_store, "evt_old", delivery_id=id_at(noon))
    await settle_all(pg_store, "completed")
    await add_delivery(pg_store, "evt_new")
    old_day = "jobs_p" + noon.strftime("%Y%m%d")
    async with pg_session(pg_url) as conn:
        # Nothing due before today: the floor is the first id of the day an hour ago.
        floor = await conn.fetchval("SELECT hookinbox_job_floor()")
        assert floor == day_floor(delivery_id_floor(time.time() - 3600))
        assert old_day not in await _claim_locks(conn, floor)
        # Without a floor the same claim locks every day (what the floor saves).
        assert old_day in await _claim_locks(conn, "")
        # A job of that day made due again moves the floor back to its day.
        await conn.execute(
            "UPDATE jobs SET state = 'accepted', next_attempt_at = now() WHERE id < $1", floor
        )
        assert await conn.fetchval("SELECT hookinbox_job_floor()") == day_floor(id_at(noon))


async def test_jobs_a_retired_day_left_in_default_do_not_hold_the_claims_floor_back(
    pg_store: Store, pg_url: str
) -> None:
    made = await _jobs_days_ago(pg_store, days=5)
    await pg_store.partitions.retire(0, table="attempts")
    await pg_store.partitions.retire(0, table="jobs")
    # The days kept begin two days ago, a day of finished jobs; a job due today.
    kept_noon = _days_ago(2)
    await pg_store.partitions.create_ahead(7, today=kept_noon.date())
    finished = await add_delivery(pg_store, "evt_finished", delivery_id=id_at(kept_noon))
    today_id = await add_delivery(pg_store, "evt_today")
    kept_day = "jobs_p" + kept_noon.strftime("%Y%m%d")
    async with pg_session(pg_url) as conn:
        await conn.execute(
            "UPDATE jobs SET state = 'completed', completed_at = now() WHERE id = $1",
            f"{finished}:count",
        )
        # The dead letter holds its order key, and today's job is of that key.
        await conn.execute(
            "UPDATE jobs SET order_key = 'customer-1', order_hold = true WHERE id = $1",
            made["dead"],
        )
        await conn.execute(
            "UPDATE jobs SET order_key = 'customer-1' WHERE id = $1", f"{today_id}:count"
        )
        # DEFAULT holds the retired day's due job and dead letter: the floor of the version
        # before went back to their day; now it is the day an hour ago, and the ids below
        # the first day kept are read besides.
        held_back = await conn.fetchval("SELECT hookinbox_job_floor()")
        assert held_back == day_floor(id_at(_days_ago(5)))
        floor, below = await conn.fetchrow("SELECT floor, below FROM hookinbox_claim_floors()")
        assert floor == day_floor(delivery_id_floor(time.time() - 3600))
        assert below == day_floor(id_at(kept_noon))
        locked = await _claim_locks(conn, floor, below)
        assert kept_day not in locked and "jobs_default" in locked
        assert kept_day in await _claim_locks(conn, held_back)
    # A worker starting now (its first claim asks for the floors) claims the held due job
    # (below) and not today's job, whose key the dead letter in DEFAULT still holds;
    # released, today's job is claimed.
    worker = open_store_for(pg_url)
    await worker.open(migrate=False)
    try:
        claimed = await worker.queue.claim_due_jobs("w", 10, 30)
        assert [c.id for c in claimed] == [made["waiting"]]
        async with pg_session(pg_url) as conn:
            await conn.execute("UPDATE jobs SET order_hold = false WHERE id = $1", made["dead"])
        claimed = await worker.queue.claim_due_jobs("w", 10, 30)
        assert [c.id for c in claimed] == [f"{today_id}:count"]
    finally:
        await worker.close()


async def test_a_dead_letter_of_an_older_day_retried_is_claimed_once_the_floor_is_asked_again(
    pg_store: Store, pg_url: str
) -> None:
    made = await _jobs_days_ago(pg_store)
    (first,) = await pg_store.queue.claim_due_jobs("w", 10, 30)
    assert first.id == made["waiting"]
    assert await pg_store.queue.complete_job(first.id, first.lease_token, "biz")
    # Nothing is due before today now: once the worker asks again, its floor is today's.
    await asyncio.sleep(FLOOR_REFRESH)
    await add_delivery(pg_store, "evt_today")
    (today,) = await pg_store.queue.claim_due_jobs("w", 10, 30)
    assert await pg_store.queue.complete_job(today.id, today.lease_token, "biz")
    # A dead letter of three days ago retried: due again in a day before that floor.
    await ops.dlq_retry(pg_store, make_config(pg_url), made["dead"], actor=ACTOR)
    deadline = time.monotonic() + FLOOR_REFRESH + 10
    claimed = []
    while not claimed and time.monotonic() < deadline:
        claimed = await pg_store.queue.claim_due_jobs("w", 10, 30)
        if not claimed:
            await asyncio.sleep(0.1)
    assert [c.id for c in claimed] == [made["dead"]]


async def test_a_store_at_027_converts_jobs_in_place_while_receiving_and_settling(
    pg_url: str,
) -> None:
    await _migrated_up_to(pg_url, 27)
    old = open_store_for(pg_url)
    await old.open(migrate=False)
    worker = open_store_for(pg_url)
    await worker.open(migrate=False)
    try:
        before = [f"{await add_delivery(old, f'evt_old_{i}')}:count" for i in range(20)]
        await settle_all(old, "completed")
        parked = f"{await add_delivery(old, 'evt_parked')}:count"
        async with pg_session(pg_url) as conn:
            await conn.execute(
                "INSERT INTO parked_events (job_id, source, kind, provider_ref, deadline)"
                " VALUES ($1, 'test', 'video', 'vid_1', now() + interval '1 day')",
                parked,
            )
        # Deliveries are received and jobs settle while the migration runs; while a long
        # reader of jobs (a search) keeps the swap from its lock, each waits at most a
        # try's 200 ms behind it, never until the reader is done.
        settled: list[str] = []
        waits: list[float] = []
        loop = asyncio.get_running_loop()

        async def receive_and_settle() -> None:
            started = loop.time()
            await add_delivery(worker, f"evt_new_{len(settled)}")
            claimed = await worker.queue.claim_due_jobs("w", 10, 30)
            for job in claimed:
                if job.id != parked:
                    assert await worker.queue.fail_job(job.id, job.lease_token, "crm_unavailable")
                    settled.append(job.id)
                else:
                    assert await worker.queue.retry_job(
                        job.id, job.lease_token, "crm_unavailable", 3600
                    )
            waits.append(loop.time() - started)

        async with pg_session(pg_url) as reader:
            search = reader.transaction()
            await search.start()
            await reader.fetchval("SELECT count(*) FROM jobs")
            migrating = asyncio.create_task(old.migrate())
            while len(settled) < 20:
                await receive_and_settle()
            assert not migrating.done()
            await search.rollback()
        while not migrating.done() or len(settled) < 30:
            await receive_and_settle()
        applied = await migrating
        assert [name.split("_")[0] for name in applied] == ["028", "029", "030"]
        assert max(waits) < 2.0, waits
    finally:
        await worker.close()
        await old.close()

    async with pg_session(pg_url) as conn:
        kind = await conn.fetchval(
            "SELECT relkind::text FROM pg_class WHERE oid = 'jobs'::regclass"
        )
        assert kind == "p"
        assert {await _place(conn, j) for j in [*before, *settled, parked]} == {"jobs_legacy"}
        # The old table's six indexes became the parent's: none was built (030 then
        # dropped jobs_delivery_idx: a delivery's jobs are a range of jobs_pkey).
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM pg_indexes WHERE tablename = 'jobs_legacy'"
                " AND schemaname = current_schema()"
            )
            == 5
        )
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM pg_constraint WHERE contype = 'f'"
                " AND conrelid = 'parked_events'::regclass"
            )
            == 0
        )

    store = open_store_for(pg_url)
    await store.open()
    try:
        # The old table retires whole like a day once past the key retention (a negative
        # retention stands for the days passing): the dead letters and the parked job stay.
        await store.partitions.retire(-2 * DAY, table="attempts")
        retired = await store.partitions.retire(-2 * DAY, table="jobs")
        legacy = next(each for each in retired if each.name == "jobs_legacy")
        assert legacy.retired and legacy.rows == len(before) + len(settled) + 1
        assert legacy.held == len(settled) + 1
        async with pg_session(pg_url) as conn:
            assert await _place(conn, parked) == "jobs_default"
            assert await conn.fetchval("SELECT count(*) FROM parked_events") == 1
        # New jobs go on: received into their day, claimed and completed.
        await add_delivery(store, "evt_after")
        done = await settle_all(store, "completed")
        assert len(done) == 1 and done[0] != parked
    finally:
        await store.close()


def test_only_a_days_first_id_is_written_into_a_statement() -> None:
    claim = load_postgres_statements("hot_path")["claim"]
    written = pinned(claim, "floor", "dlv_0123456789ab").text
    assert ":floor" not in written and written.count("'dlv_0123456789ab'") >= 3
    assert ":floor" not in pinned(claim, "floor", "").text
    for hostile in ("x' OR '1'='1", "dlv_0123", "dlv_0123456789ab'; --", "DLV_0123456789AB"):
        with pytest.raises(StoreError):
            pinned(claim, "floor", hostile)
