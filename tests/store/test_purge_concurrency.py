"""A journal purge and a replay of the same old deliveries at once, on PostgreSQL, through
real concurrent connections: the purge locks its batch's jobs in id order before it
deletes anything, as the replay's requeue does, so neither fails on a deadlock; and a job
the replay put back in the queue stays, with its delivery, instead of going with the
batch it was read in."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import asyncpg

from hookinbox.store import Settlement, Store
from tests.store.test_contract import new_delivery
from tests.support.database import PG_URL

DELIVERIES = 20
#: What the queue's requeue statement does to a job (queries/queue.sql, requeue).
_REQUEUE = (
    "UPDATE {schema}.jobs SET state = 'accepted', max_attempts = attempts + 1,"
    " next_attempt_at = now(), completed_at = NULL WHERE id = ANY($1) AND state = 'completed'"
)


async def test_a_purge_and_a_replay_of_the_same_deliveries_neither_deadlock_nor_lose_the_replay(
    backend: str, db_url: str, store: Store
) -> None:
    if backend == "sqlite":
        return  # one writer at a time: nothing interleaves
    job_ids = await _completed_deliveries(store)
    replayed = job_ids[: DELIVERIES // 2]

    async with _replay_in_a_transaction(db_url) as replay:
        await replay.requeue(replayed[:1])
        purge = asyncio.create_task(store.retention.purge_deliveries(0, 1000))
        await replay.until_the_purge_waits(purge)
        await replay.requeue(replayed[1:])
        await replay.commit()
        purged = await asyncio.wait_for(purge, timeout=30)

    assert purged == DELIVERIES - len(replayed)
    await _assert_only_replayed_left(store, job_ids, replayed)


async def test_a_purge_batch_whose_every_row_was_replayed_meanwhile_purges_the_next_rows(
    backend: str, db_url: str, store: Store
) -> None:
    """A batch that deletes nothing ends a purge run: one whose rows a replay took back
    while it waited would have ended it with the next rows still purgeable."""
    if backend == "sqlite":
        return  # one writer at a time: nothing interleaves
    job_ids = await _completed_deliveries(store)
    batch = DELIVERIES // 2
    replayed = job_ids[:batch]  # the oldest deliveries: the batch's own

    async with _replay_in_a_transaction(db_url) as replay:
        await replay.requeue(replayed)
        purge = asyncio.create_task(store.retention.purge_deliveries(0, batch))
        await replay.until_the_purge_waits(purge)
        await replay.commit()
        purged = await asyncio.wait_for(purge, timeout=30)

    assert purged == batch
    await _assert_only_replayed_left(store, job_ids, replayed)


async def _completed_deliveries(store: Store) -> list[str]:
    """DELIVERIES journal rows, each with its one job completed; the job ids in id order
    (the order of their deliveries)."""
    await store.journal.reserve_deliveries([new_delivery(f"e{i}") for i in range(DELIVERIES)])
    jobs = await store.queue.claim_due_jobs("w", DELIVERIES, 30)
    await store.queue.settle_jobs([Settlement(j.id, j.lease_token, "completed") for j in jobs])
    await asyncio.sleep(0.01)  # last seen before "now minus 0 s"
    return sorted(j.id for j in jobs)


class _Replay:
    """A replay's requeue in a transaction of its own connection, held open while the
    purge runs, and a second connection that watches the purge wait for its locks."""

    def __init__(self, conn: asyncpg.Connection, watch: asyncpg.Connection, schema: str) -> None:
        self._conn = conn
        self._watch = watch
        self._requeue = _REQUEUE.format(schema=schema)

    async def requeue(self, job_ids: list[str]) -> None:
        await self._conn.execute(self._requeue, job_ids)

    async def commit(self) -> None:
        await self._conn.execute("COMMIT")

    async def until_the_purge_waits(self, purge: asyncio.Task[int]) -> None:
        deadline = time.monotonic() + 20
        while not await self._watch.fetchval(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'"
        ):
            assert time.monotonic() < deadline, "the purge never waited for the replay's lock"
            assert not purge.done(), "the purge did not wait for the replayed job"
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def _replay_in_a_transaction(db_url: str) -> AsyncIterator[_Replay]:
    schema = db_url.rsplit("search_path=", 1)[1]
    conn = await asyncpg.connect(PG_URL)
    watch = await asyncpg.connect(PG_URL)
    try:
        await conn.execute("BEGIN")
        yield _Replay(conn, watch, schema)
    finally:
        await conn.close()
        await watch.close()


async def _assert_only_replayed_left(store: Store, job_ids: list[str], replayed: list[str]) -> None:
    left = {job_id: (await store.queue.get_job(job_id)) for job_id in job_ids}
    assert sorted(job_id for job_id, job in left.items() if job is not None) == replayed
    assert {left[job_id].state for job_id in replayed} == {"accepted"}  # type: ignore[union-attr]
