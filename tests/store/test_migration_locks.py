"""A PostgreSQL migration that alters a table every receive writes does so in short tries
(``hookinbox_alter_when_unlocked``, migration 026): while a receiver's transaction holds
the table, the migration waits, and the other receivers are held up for at most one
try's 200 ms (here: under a second each) instead of until that transaction ends."""

from __future__ import annotations

import asyncio
import time

from hookinbox.store.dialect import POSTGRES
from hookinbox.store.migrations import load_migrations
from tests.support.database import pg_session

_ROW_TRIGGERS = """
SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal
  AND t.tgname IN ('deliveries_delete_jobs', 'deliveries_delete_payload', 'jobs_delete_attempts')
  AND t.tgtype & 1 = 1
"""


async def test_a_migration_waits_out_an_open_receive_without_holding_up_the_others(
    pg_url: str,
) -> None:
    migrations = load_migrations("hookinbox.store.postgres", POSTGRES)
    (cascade,) = [m for m in migrations if m.version == 26]
    async with pg_session(pg_url) as setup:
        for migration in migrations:
            if migration.version < 26:
                await setup.execute(migration.sql)
        assert await setup.fetchval(_ROW_TRIGGERS) == 3

    async with (
        pg_session(pg_url) as holder,
        pg_session(pg_url) as migrator,
        pg_session(pg_url) as other,
    ):
        holder_tx = holder.transaction()
        await holder_tx.start()
        await holder.execute("LOCK TABLE deliveries IN ROW EXCLUSIVE MODE")  # as an insert does
        migrator_pid = await migrator.fetchval("SELECT pg_backend_pid()")

        async def migrate() -> None:
            async with migrator.transaction():
                await migrator.execute(cascade.sql)
                # The short tries' lock_timeout ended with them: the rest of a migration
                # waits for its locks as usual.
                assert await migrator.fetchval("SHOW lock_timeout") == "0"

        task = asyncio.create_task(migrate())
        try:
            deadline = time.monotonic() + 20
            while not await other.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1"
                " AND wait_event IN ('relation', 'PgSleep')",
                migrator_pid,
            ):
                assert time.monotonic() < deadline, "the migration never waited for the lock"
                assert not task.done(), "the migration did not wait for the open receive"
                await asyncio.sleep(0.02)

            await other.execute("SET lock_timeout = '1s'")
            waits = []
            for _ in range(5):
                started = time.monotonic()
                async with other.transaction():
                    await other.execute("LOCK TABLE deliveries IN ROW EXCLUSIVE MODE")
                waits.append(time.monotonic() - started)
            assert not task.done()
            assert max(waits) < 1.0, waits
        finally:
            await holder_tx.commit()
            await asyncio.wait_for(task, timeout=60)
        assert await other.fetchval(_ROW_TRIGGERS) == 0
