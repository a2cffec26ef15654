"""How the purge's batch statements reach their rows, on both stores.

A purge batch picks 1,000 payloads (or journal rows) and checks each delivery's jobs. At
5 million journal rows that is 0.2 s when the joins walk the primary key of
``deliveries`` and ``jobs_delivery_idx``, and 4 s when PostgreSQL hashes all three
tables instead, which it must when the join compares ``deliveries.id`` (COLLATE "C")
with a plain text column without naming a collation (docs/performance.md, "Cost
growth"). These tests read the plan with scans disabled as far as the database allows,
so a join that cannot use an index shows up as a scan of the whole table. They reach the
store's driver on purpose: plans are below the store's contract.
"""

from __future__ import annotations

from typing import Any

from hookinbox.store import Store
from hookinbox.store.dialect import POSTGRES
from hookinbox.store.retention import _DELIVERY_BATCH, _OVERDUE_BATCH, _PAYLOAD_BATCH
from hookinbox.store.sql import Sql
from tests.support.plans import query_plan, scans_whole

_PARAMS: dict[str, Any] = {"age": 3600.0, "limit": 1000, "ceiling": "dlv_0190"}


async def test_a_payload_purge_batch_walks_payloads_and_finds_deliveries_and_jobs_by_index(
    store: Store,
) -> None:
    plan = await query_plan(store, _PAYLOAD_BATCH, _PARAMS)
    assert not scans_whole(plan, "deliveries", "d"), plan
    assert not scans_whole(plan, "jobs", "j"), plan


async def test_a_journal_purge_batch_checks_each_deliverys_jobs_by_index(store: Store) -> None:
    plan = await query_plan(store, _DELIVERY_BATCH, _PARAMS)
    assert not scans_whole(plan, "jobs", "j"), plan
    # Walked by the primary key up to the ceiling, not by an index on last_seen_at (gone:
    # every duplicate's update of it was a new entry in every index of the journal).
    assert not scans_whole(plan, "deliveries", "d"), plan
    assert not any("last_seen_idx" in line for line in plan), plan


async def test_postgres_overdue_payload_batch_finds_deliveries_and_jobs_by_index(
    store: Store,
) -> None:
    if store._db.dialect is not POSTGRES:
        return  # SQLite has no partitions
    plan = await query_plan(store, _OVERDUE_BATCH, _PARAMS)
    assert not scans_whole(plan, "deliveries", "d"), plan
    assert not scans_whole(plan, "jobs", "j"), plan


async def test_postgres_purge_batches_probe_each_rows_jobs_not_join_every_unfinished_job(
    store: Store,
) -> None:
    """A delivery's jobs are a range of ``jobs_pkey`` whose bounds come from the row;
    PostgreSQL cannot size such a range, and flattened into an anti-join the check read
    every day of jobs once per batch (0.24 s a batch at 5 million jobs, against 16 ms
    probed). Each batch asks it as a probe per row."""
    if store._db.dialect is not POSTGRES:
        return  # SQLite's lookup is its index on delivery_id
    for statement in (_DELIVERY_BATCH, _PAYLOAD_BATCH, _OVERDUE_BATCH):
        db: Any = store._db
        found = await db.rows(Sql("EXPLAIN " + statement.text), **_PARAMS)
        plan = [str(r["QUERY PLAN"]) for r in found]
        assert any("SubPlan" in line for line in plan), plan
        assert not any("Anti Join" in line or "Semi Join" in line for line in plan), plan
