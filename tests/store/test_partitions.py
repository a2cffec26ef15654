"""PostgreSQL's payload and attempt partitions (one per UTC day of delivery ids): made
ahead, retired whole with the held rows kept, a day without a partition still received,
and an existing store converted in place while it receives and settles. SQLite has none:
its purge deletes rows, which the last test checks on both stores."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

from hookinbox import ops
from hookinbox.store import Store, open_store_for
from hookinbox.store.dialect import POSTGRES
from hookinbox.store.migrations import load_migrations
from tests.cli.test_ops_cli import hookinbox
from tests.store.test_contract import new_delivery
from tests.support.configs import write_config
from tests.support.database import pg_session
from tests.support.inbox import make_config
from tests.support.journal import add_delivery, id_at, settle_all

ACTOR = "cli:tester"
DAY = 86400.0


def _today() -> datetime:
    return datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


async def _where(conn: asyncpg.Connection, delivery_id: str) -> str | None:
    """The partition holding the delivery's payload (None: no payload)."""
    found = await conn.fetchval(
        "SELECT tableoid::regclass::text FROM payloads WHERE delivery_id = $1", delivery_id
    )
    return None if found is None else str(found).rsplit(".", 1)[-1]


async def _three_deliveries_days_ago(store: Store, days: int = 3) -> dict[str, str]:
    """``days`` ago: one completed, one dead-lettered, one still accepted."""
    noon = _today() - timedelta(days=days) + timedelta(hours=12)
    assert await store.partitions.create_ahead(7, today=noon.date() - timedelta(days=1)) >= 2
    made = {}
    for n, (name, state) in enumerate(
        (("done", "completed"), ("dead", "failed"), ("waiting", None))
    ):
        made[name] = await add_delivery(store, f"evt_{name}", delivery_id=id_at(noon, n))
        if state is not None:
            await settle_all(store, state)
    return made


async def test_a_day_past_the_retention_retires_and_its_held_payloads_stay(
    pg_store: Store, pg_url: str
) -> None:
    made = await _three_deliveries_days_ago(pg_store)
    day = "payloads_p" + (_today() - timedelta(days=3)).strftime("%Y%m%d")
    async with pg_session(pg_url) as conn:
        assert {await _where(conn, i) for i in made.values()} == {day}

    # Retention 0: the completed job's payload may go (with a day's retention it would be
    # held a day after its completion, in DEFAULT).
    retired = await pg_store.partitions.retire(0)
    mine = next(each for each in retired if each.name == day)
    assert (mine.retired, mine.rows, mine.held) == (True, 3, 2)
    assert day not in {p.name for p in await pg_store.partitions.listing()}
    async with pg_session(pg_url) as conn:
        assert await _where(conn, made["done"]) is None
        assert await _where(conn, made["dead"]) == "payloads_default"
        assert await _where(conn, made["waiting"]) == "payloads_default"
        assert await conn.fetchval("SELECT to_regclass($1)", day) is None

    # The journal says so, without a mark: a payload is retained while its row exists.
    done = await pg_store.journal.get_delivery("evt_done")
    assert done is not None and not done.payload_retained
    # A late redelivery of a retired day is still a duplicate (the journal's key).
    again = await add_delivery_answer(pg_store, "evt_done")
    assert again == "duplicate"
    # The dead letter retried after its day retired still has its body.
    config = make_config(pg_url)
    await ops.dlq_retry(pg_store, config, f"{made['dead']}:count", actor=ACTOR)
    (claimed,) = [
        c for c in await pg_store.queue.claim_due_jobs("w", 10, 30) if c.delivery_id == made["dead"]
    ]
    assert claimed.body is not None and b"evt_dead" in claimed.body


async def _attempt_places(conn: asyncpg.Connection, job_id: str) -> list[str]:
    """The partitions holding the job's attempts, one entry per attempt."""
    found = await conn.fetch(
        "SELECT tableoid::regclass::text AS part FROM attempts WHERE job_id = $1 ORDER BY id",
        job_id,
    )
    return [str(r["part"]).rsplit(".", 1)[-1] for r in found]


async def test_a_day_of_attempts_past_the_key_retention_retires_and_unfinished_jobs_keep_theirs(
    pg_store: Store, pg_url: str
) -> None:
    made = await _three_deliveries_days_ago(pg_store)
    # The waiting one was tried once and is due again: an unfinished job with an attempt.
    (job,) = await pg_store.queue.claim_due_jobs("w", 10, 30)
    assert await pg_store.queue.retry_job(job.id, job.lease_token, "crm_unavailable", 0)
    day = "attempts_p" + (_today() - timedelta(days=3)).strftime("%Y%m%d")
    done, dead, waiting = (f"{made[name]}:count" for name in ("done", "dead", "waiting"))
    async with pg_session(pg_url) as conn:
        assert [await _attempt_places(conn, j) for j in (done, dead, waiting)] == [[day]] * 3

    # Retention 0 stands for the key retention passed: the day goes whole, the attempts of
    # the dead letter and of the job still due move to DEFAULT, the completed job's go.
    retired = await pg_store.partitions.retire(0, table="attempts")
    mine = next(each for each in retired if each.name == day)
    assert (mine.table, mine.retired, mine.rows, mine.held) == ("attempts", True, 3, 2)
    assert day not in {p.name for p in await pg_store.partitions.listing()}
    async with pg_session(pg_url) as conn:
        assert await _attempt_places(conn, done) == []
        assert await _attempt_places(conn, dead) == ["attempts_default"]
        assert await _attempt_places(conn, waiting) == ["attempts_default"]
        assert await conn.fetchval("SELECT to_regclass($1)", day) is None
    # The dead letter's history is still read by its job; its next attempt is numbered on.
    assert [a.number for a in await pg_store.queue.list_attempts(dead)] == [1]
    (again,) = await pg_store.queue.claim_due_jobs("w", 10, 30)
    assert again.id == waiting
    assert await pg_store.queue.complete_job(again.id, again.lease_token, "biz")
    assert [a.number for a in await pg_store.queue.list_attempts(waiting)] == [1, 2]

    # The journal's purge then deletes the rows of that day whose jobs all completed; the
    # cascade finds the attempts held in DEFAULT.
    assert await pg_store.retention.purge_deliveries(0, 100) == 2
    async with pg_session(pg_url) as conn:
        assert await _attempt_places(conn, waiting) == []
        assert await _attempt_places(conn, dead) == ["attempts_default"]


async def add_delivery_answer(store: Store, event_id: str) -> str:
    """The answer to a new delivery of ``event_id`` from add_delivery's source."""
    again = dataclasses.replace(new_delivery(event_id), source="test")
    (answer,) = await store.journal.reserve_deliveries([again])
    return str(answer.outcome)


async def test_the_default_partition_rows_go_by_rows_once_their_jobs_complete(
    pg_store: Store, pg_url: str
) -> None:
    made = await _three_deliveries_days_ago(pg_store)
    await pg_store.partitions.retire(0)
    for job in await pg_store.queue.claim_due_jobs("w", 10, 30):
        assert await pg_store.queue.complete_job(job.id, job.lease_token, "b")
    # With a retention of a day or more, only DEFAULT's rows go by rows (the others with
    # their day): none of these yet, completed just now.
    assert await pg_store.retention.count_purgeable_payloads(DAY) == 0
    assert await pg_store.retention.count_purgeable_payloads(0) == 1
    assert await pg_store.retention.purge_payloads(0, 100) == 1
    async with pg_session(pg_url) as conn:
        assert await _where(conn, made["waiting"]) is None
        assert await _where(conn, made["dead"]) == "payloads_default"


async def test_a_day_that_cannot_retire_for_a_day_is_purged_by_rows(
    pg_store: Store, pg_url: str
) -> None:
    made = await _three_deliveries_days_ago(pg_store)
    day = "payloads_p" + (_today() - timedelta(days=3)).strftime("%Y%m%d")
    async with pg_session(pg_url) as conn:  # as if received and completed three days ago
        await conn.execute("UPDATE deliveries SET first_seen_at = now() - interval '3 days'")
        await conn.execute(
            "UPDATE jobs SET completed_at = now() - interval '3 days' WHERE state = 'completed'"
        )
    retired = await pg_store.partitions.retire(DAY, max_held=1)
    mine = next(each for each in retired if each.name == day)
    assert (mine.retired, mine.deferred, mine.held) == (False, "held", 2)
    # Its day is more than a day past the cutoff: the row-by-row path takes what may go.
    assert await pg_store.retention.count_purgeable_payloads(DAY) == 1
    assert await pg_store.retention.purge_payloads(DAY, 100) == 1
    async with pg_session(pg_url) as conn:
        assert await _where(conn, made["done"]) is None
        assert await _where(conn, made["dead"]) == day


async def test_a_retirement_waits_for_a_lock_at_most_its_bound_then_goes_next_time(
    pg_store: Store, pg_url: str
) -> None:
    await _three_deliveries_days_ago(pg_store)
    day = "payloads_p" + (_today() - timedelta(days=3)).strftime("%Y%m%d")
    async with pg_session(pg_url) as reader:
        # A long reader of payloads (a search): the DETACH would queue behind it, and
        # every insert behind the DETACH; it gives up after lock_wait instead.
        tx = reader.transaction()
        await tx.start()
        await reader.fetchval("SELECT count(*) FROM payloads")
        loop = asyncio.get_running_loop()
        started = loop.time()
        retired = await pg_store.partitions.retire(0, lock_wait="100ms")
        waited = loop.time() - started
        await tx.rollback()
    mine = next(each for each in retired if each.name == day)
    assert (mine.retired, mine.deferred) == (False, "lock")
    assert waited < 5
    assert day in {p.name for p in await pg_store.partitions.listing()}
    # Nothing half done: every payload is where it was.
    async with pg_session(pg_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM payloads_default") == 0
    again = await pg_store.partitions.retire(0)
    assert next(each for each in again if each.name == day).retired


async def _waiting_for_a_lock(conn: asyncpg.Connection, relation: str) -> bool:
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
            " WHERE c.relname = $1 AND NOT l.granted)",
            relation,
        )
    )


async def test_a_retirement_reports_how_long_it_held_its_table_against_writers(
    pg_store: Store, pg_url: str
) -> None:
    """A reader of the day holds the DETACH back; from its lock request on, every writer
    of payloads queues behind it, so that wait is the receivers' and is reported apart
    from the retirement's whole time."""
    await _three_deliveries_days_ago(pg_store)
    day = "payloads_p" + (_today() - timedelta(days=3)).strftime("%Y%m%d")
    loop = asyncio.get_running_loop()
    async with pg_session(pg_url) as reader, pg_session(pg_url) as watcher:
        tx = reader.transaction()
        await tx.start()
        await reader.fetchval(f"SELECT count(*) FROM {day}")
        retiring = asyncio.create_task(pg_store.partitions.retire(0, lock_wait="30s"))
        deadline = loop.time() + 20
        while not await _waiting_for_a_lock(watcher, day):
            assert loop.time() < deadline and not retiring.done(), "the DETACH never waited"
            await asyncio.sleep(0.01)
        seen_waiting = loop.time()
        await asyncio.sleep(0.5)  # the reader's work: what the writers wait for
        held = loop.time() - seen_waiting
        await tx.rollback()
        retired = await asyncio.wait_for(retiring, 20)
    mine = next(each for each in retired if each.name == day)
    assert mine.retired
    assert held <= mine.locked_seconds <= mine.seconds
    assert mine.as_json()["locked_seconds"] == round(mine.locked_seconds, 4)
    # The days retired after it (made ahead, empty) locked payloads for a moment only.
    after = [each for each in retired if each.name > day and each.table == "payloads"]
    assert after and all(each.retired and 0 < each.locked_seconds < held for each in after)


async def test_a_delivery_whose_day_has_no_partition_still_lands_and_moves_in_later(
    pg_store: Store, pg_url: str
) -> None:
    today = "payloads_p" + _today().strftime("%Y%m%d")
    async with pg_session(pg_url) as conn:
        await conn.execute(f"ALTER TABLE payloads DETACH PARTITION {today}")
        await conn.execute(f"DROP TABLE {today}")
    delivery = await add_delivery(pg_store, "evt_orphan")
    async with pg_session(pg_url) as conn:
        assert await _where(conn, delivery) == "payloads_default"
        # A reader of DEFAULT (a claim's plan locks every partition) keeps the attach from
        # its lock: the day is left for next time, after a bounded wait, not an error.
        reading = conn.transaction()
        await reading.start()
        await conn.fetchval("SELECT count(*) FROM payloads_default")
        assert await pg_store.partitions.create_ahead() == 0
        await reading.rollback()
    assert await pg_store.partitions.create_ahead() == 1
    async with pg_session(pg_url) as conn:
        assert await _where(conn, delivery) == today
    (claimed,) = await pg_store.queue.claim_due_jobs("w", 10, 30)
    assert claimed.body is not None and b"evt_orphan" in claimed.body
    assert await pg_store.partitions.create_ahead() == 0  # there: one catalog query


_MIGRATIONS_TABLE = (
    "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now())"
)


async def _migrated_up_to(pg_url: str, version: int) -> None:
    """The store's schema as the migrations up to ``version`` made it, recorded so."""
    async with pg_session(pg_url) as conn:
        await conn.execute(_MIGRATIONS_TABLE)
        for migration in load_migrations("hookinbox.store.postgres", POSTGRES):
            if migration.version <= version:
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations VALUES ($1, $2)",
                    migration.version,
                    migration.name,
                )


async def test_a_store_at_018_with_rows_converts_in_place_while_receiving(pg_url: str) -> None:
    await _migrated_up_to(pg_url, 18)
    old = open_store_for(pg_url)
    await old.open(migrate=False)
    receiver = open_store_for(pg_url)
    await receiver.open(migrate=False)
    try:
        before = [await add_delivery(old, f"evt_old_{i}") for i in range(50)]
        await settle_all(old, "completed")
        # Receiving goes on while the migration runs, and never fails; while a long reader
        # of payloads (a search) keeps the migration from its lock, the receivers do not
        # queue behind it for longer than its lock_timeout tries.
        received: list[str] = []
        waits: list[float] = []
        loop = asyncio.get_running_loop()

        async def receive() -> None:
            started = loop.time()
            received.append(await add_delivery(receiver, f"evt_new_{len(received)}"))
            waits.append(loop.time() - started)

        async with pg_session(pg_url) as reader:
            search = reader.transaction()
            await search.start()
            await reader.fetchval("SELECT count(*) FROM payloads")
            migrating = asyncio.create_task(old.migrate())
            while len(received) < 30:
                await receive()
            assert not migrating.done()  # it cannot have its lock while the search runs
            await search.rollback()
        while not migrating.done() or len(received) < 40:
            await receive()
        applied = await migrating
        assert max(waits) < 2.0, waits
        numbers = [name.split("_")[0] for name in applied]
        assert numbers[:3] == ["019", "020", "021"] and numbers == sorted(numbers)
    finally:
        await receiver.close()
        await old.close()

    async with pg_session(pg_url) as conn:
        assert (
            await conn.fetchval(
                "SELECT relkind::text FROM pg_class WHERE oid = 'payloads'::regclass"
            )
            == "p"
        )
        places = {await _where(conn, i) for i in before + received}
        assert places == {"payloads_legacy"}
        # The foreign key is gone from the old table (a trigger keeps its cascade).
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM pg_constraint WHERE contype = 'f'"
                " AND conrelid IN ('payloads'::regclass, 'payloads_legacy'::regclass)"
            )
            == 0
        )
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM pg_indexes WHERE indexname = 'deliveries_last_seen_idx'"
                " AND schemaname = current_schema()"
            )
            == 0
        )

    store = open_store_for(pg_url)
    await store.open()
    try:
        view = await store.journal.get_delivery("evt_old_0")
        assert view is not None and view.payload_retained
        # The old table is a partition like a day: it retires whole once past the retention
        # (a negative retention stands for the days passing).
        retired = await store.partitions.retire(-2 * DAY)
        legacy = next(each for each in retired if each.name == "payloads_legacy")
        assert legacy.retired and legacy.rows == len(before) + len(received)
        assert legacy.held == len(received)  # their jobs are still accepted
        # A journal row deleted takes its payload (DEFAULT now) with it, by the trigger.
        async with pg_session(pg_url) as conn:
            await conn.execute("DELETE FROM deliveries WHERE id = $1", received[0])
            assert await _where(conn, received[0]) is None
    finally:
        await store.close()


async def test_a_store_at_026_with_attempts_converts_in_place_while_jobs_settle(
    pg_url: str,
) -> None:
    await _migrated_up_to(pg_url, 26)
    old = open_store_for(pg_url)
    await old.open(migrate=False)
    worker = open_store_for(pg_url)
    await worker.open(migrate=False)
    try:
        for i in range(20):
            await add_delivery(old, f"evt_old_{i}")
        before = await settle_all(old, "completed")
        # Jobs go on settling (each an attempt row) while the migration runs; while a long
        # reader of attempts (a trace) keeps the swap from its lock, a settle waits at most
        # a try's 200 ms behind it, never until the reader is done.
        settled: list[str] = []
        waits: list[float] = []
        loop = asyncio.get_running_loop()

        async def settle_one() -> None:
            await add_delivery(worker, f"evt_new_{len(settled)}")
            started = loop.time()
            settled.extend(await settle_all(worker, "failed"))
            waits.append(loop.time() - started)

        async with pg_session(pg_url) as reader:
            trace = reader.transaction()
            await trace.start()
            await reader.fetchval("SELECT count(*) FROM attempts")
            migrating = asyncio.create_task(old.migrate())
            while len(settled) < 20:
                await settle_one()
            assert not migrating.done()
            await trace.rollback()
        while not migrating.done() or len(settled) < 30:
            await settle_one()
        applied = await migrating
        assert [name.split("_")[0] for name in applied] == ["027", "028", "029", "030"]
        assert max(waits) < 2.0, waits
    finally:
        await worker.close()
        await old.close()

    async with pg_session(pg_url) as conn:
        kind = await conn.fetchval(
            "SELECT relkind::text FROM pg_class WHERE oid = 'attempts'::regclass"
        )
        assert kind == "p"
        places = {p for job in before + settled for p in await _attempt_places(conn, job)}
        assert places == {"attempts_legacy"}
        # The old table's index of (job_id, id) became the parent's: none was built.
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM pg_indexes WHERE tablename = 'attempts_legacy'"
                " AND schemaname = current_schema()"
            )
            == 2
        )

    store = open_store_for(pg_url)
    await store.open()
    try:
        # The old table retires whole like a day once past the key retention (a negative
        # retention stands for the days passing): the dead letters keep their attempts.
        retired = await store.partitions.retire(-2 * DAY, table="attempts")
        legacy = next(each for each in retired if each.name == "attempts_legacy")
        assert legacy.retired and legacy.rows == len(before) + len(settled)
        assert legacy.held == len(settled)
        # The ids' sequence went with the parent, not with the old table.
        await add_delivery(store, "evt_after")
        (after,) = await settle_all(store, "completed")
        assert [a.number for a in await store.queue.list_attempts(after)] == [1]
        assert [a.number for a in await store.queue.list_attempts(settled[0])] == [1]
    finally:
        await store.close()


async def _make_a_day_ago(url: str, days: int) -> None:
    store = open_store_for(url)
    await store.open()
    try:
        await store.partitions.create_ahead(0, today=(_today() - timedelta(days=days)).date())
    finally:
        await store.close()


def test_cli_purge_reports_the_partitions_it_retired(pg_url: str, tmp_path: Path) -> None:
    async def prepare() -> None:
        store = open_store_for(pg_url)
        await store.open()
        try:
            await _three_deliveries_days_ago(store)
        finally:
            await store.close()

    asyncio.run(prepare())
    route = {"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}
    config = write_config(tmp_path / "hookinbox.toml", pg_url, routes=[route])
    day = "payloads_p" + (_today() - timedelta(days=3)).strftime("%Y%m%d")
    # The completed one's payload may go at once (with the default 24 h it would be held a
    # day after its completion, as the row-by-row purge keeps it).
    done = hookinbox(config, "purge", "--payloads-only", "--older-than", "0s")
    assert done.returncode == 0, done.stderr
    assert f"partition {day}: retired, 1 payloads dropped, 2 held" in done.stdout, done.stdout
    # How long the receivers' writes queued behind it, beside its whole time.
    line = re.search(
        rf"^partition {day}: .* in ([\d.]+) s, payloads locked ([\d.]+) s of it$", done.stdout, re.M
    )
    assert line is not None, done.stdout
    assert float(line[2]) <= float(line[1])
    assert "partitions: retired" in done.stdout
    # A day made ahead retires with its figures in the JSON report.
    asyncio.run(_make_a_day_ago(pg_url, days=6))
    again = hookinbox(config, "purge", "--payloads-only", "--older-than", "0s", "--json")
    report: dict[str, Any] = json.loads(again.stdout)
    assert day not in {each["name"] for each in report["partitions"]}
    gone = [each for each in report["partitions"] if each["retired"]]
    assert gone and all(0 < each["locked_seconds"] <= each["seconds"] for each in gone), gone


def test_cli_purge_retires_the_days_of_attempts_and_jobs_past_the_key_retention(
    pg_url: str, tmp_path: Path
) -> None:
    async def prepare() -> None:
        store = open_store_for(pg_url)
        await store.open()
        try:
            await _three_deliveries_days_ago(store, days=5)
        finally:
            await store.close()

    asyncio.run(prepare())
    route = {"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}
    config = write_config(tmp_path / "hookinbox.toml", pg_url, routes=[route])
    day = (_today() - timedelta(days=5)).strftime("%Y%m%d")
    # A key retention of 3 days (the source's redelivery window): the day of five days
    # ago goes, its payloads by the payload retention, its attempts by the key retention.
    dry = hookinbox(config, "purge", "--older-than", "3d", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    # Held: the dead letter's and the waiting job's (which has none yet).
    assert f"partition attempts_p{day}: would retire, the attempts of 2 jobs held" in dry.stdout
    assert f"partition jobs_p{day}: would retire, 2 jobs held" in dry.stdout
    done = hookinbox(config, "purge", "--older-than", "3d")
    assert done.returncode == 0, done.stderr
    assert f"partition attempts_p{day}: retired, 1 attempts dropped, 1 held" in done.stdout
    assert f"partition jobs_p{day}: retired, 1 jobs dropped, 2 held" in done.stdout
    assert f"partition payloads_p{day}: retired" in done.stdout
    again = hookinbox(config, "purge", "--older-than", "3d", "--json")
    report: dict[str, Any] = json.loads(again.stdout)
    retired = {each["name"]: each["table"] for each in report["partitions"]}
    assert f"attempts_p{day}" not in retired and f"jobs_p{day}" not in retired
    # The completed job's journal row stays (seen within the key retention) without its
    # job, which went with its day: not a delivery that got no job.
    checked = hookinbox(config, "reconcile", "--json")
    findings = {f["check"]: f["count"] for f in json.loads(checked.stdout)["findings"]}
    assert findings["deliveries_without_jobs"] == 0, checked.stdout


async def test_sqlite_has_no_partitions_and_its_purge_deletes_rows(
    store: Store, db_url: str
) -> None:
    if db_url.startswith("postgresql"):
        assert store.partitions.enabled
        return
    assert not store.partitions.enabled
    await add_delivery(store, "evt_done")
    await settle_all(store, "completed")
    # -1 s: a job completed within this millisecond is past the retention too.
    report = await ops.purge(store, make_config(db_url), payloads_only=True, older_than=-1)
    assert report.partitions == [] and report.steps[0].deleted == 1
