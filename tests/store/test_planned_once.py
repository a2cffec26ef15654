"""A worker's loop-turn statements (claim, settle, both in one) run through
``Driver.rows_planned_once``: on PostgreSQL, on connections whose session plans each
prepared statement once, where the default planned that statement again at every run;
every other statement keeps PostgreSQL's default. On SQLite it is ``rows``. These tests
reach the store's driver (``store._db``) on purpose: the planning is below the store API.
"""

from __future__ import annotations

from hookinbox.store import ClaimedJob, Settlement, Store
from hookinbox.store.sql import Sql
from tests.store.test_contract import new_delivery

_MODE = Sql("SELECT current_setting('plan_cache_mode') AS mode")
_ONE = Sql("SELECT 1 AS one")


async def test_the_loop_turn_plans_once_and_other_statements_keep_the_default(
    store: Store, backend: str
) -> None:
    if backend == "sqlite":
        assert [dict(r) for r in await store._db.rows_planned_once(_ONE)] == [{"one": 1}]
        return
    assert [r["mode"] for r in await store._db.rows_planned_once(_MODE)] == ["force_generic_plan"]
    assert await store._db.value(_MODE) == "auto"


async def test_claims_and_settles_planned_once_keep_their_answers_over_many_turns(
    store: Store,
) -> None:
    """More runs than PostgreSQL's five custom plans before it may switch to a generic
    one, each answering as the first did."""
    await store.journal.reserve_deliveries([new_delivery(f"e{i}") for i in range(40)])
    jobs = await store.queue.claim_due_jobs("w1", 2, 30)
    done = 0
    while jobs:
        answers, jobs_next = await store.queue.settle_and_claim(
            [_completed(job) for job in jobs], "w1", 2, 30
        )
        assert answers == [True] * len(jobs)
        done += len(jobs)
        jobs = jobs_next
    assert done == 40
    assert await store.queue.claim_due_jobs("w1", 2, 30) == []


def _completed(job: ClaimedJob) -> Settlement:
    return Settlement(job.id, job.lease_token, "completed")
