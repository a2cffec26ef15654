"""A delivery's jobs are the ones whose id begins with its id, and only those.

PostgreSQL has no index on ``jobs.delivery_id`` (migration 030): the journal's reads, the
purges and the cascade from ``deliveries`` take the range of ``jobs_pkey`` from the
delivery's id up to ``hookinbox_id_after`` of it. That range also holds the jobs of the
deliveries made later in the same millisecond, and an id made by hand has no millisecond
in it; these scenarios hold on both stores.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from hookinbox.ids import job_id
from hookinbox.store import NewJob, Settlement, Store
from hookinbox.store.sql import Sql
from tests.store.test_contract import new_delivery

# Three deliveries of one millisecond, in id order, and one id of another shape.
_FIRST = "dlv_01a2477412300000000000000000000a"
_SECOND = "dlv_01a2477412300000000000000000000b"
_THIRD = "dlv_01a2477412310000000000000000000c"
_BY_HAND = "manual-1"


async def _reserve(store: Store, *ids: str) -> None:
    items = []
    for n, delivery_id in enumerate(ids):
        item = new_delivery(f"e{n}", actions=("crm", "mail"))
        jobs = tuple(NewJob(job_id(delivery_id, j.action), j.action) for j in item.jobs)
        items.append(replace(item, id=delivery_id, jobs=jobs))
    await store.journal.reserve_deliveries(items)


async def _job_ids(store: Store) -> list[str]:
    db: Any = store._db
    return sorted(r["id"] for r in await db.rows(Sql("SELECT id FROM jobs")))


async def test_a_deliverys_view_lists_its_own_jobs_not_its_neighbours_of_the_same_millisecond(
    store: Store,
) -> None:
    await _reserve(store, _FIRST, _SECOND, _THIRD, _BY_HAND)
    for delivery_id in (_FIRST, _SECOND, _THIRD, _BY_HAND):
        view = await store.journal.get_delivery(delivery_id)
        assert view is not None
        assert [j.id for j in view.jobs] == [f"{delivery_id}:crm", f"{delivery_id}:mail"]


async def test_deleting_a_journal_row_deletes_its_jobs_and_leaves_its_neighbours(
    store: Store,
) -> None:
    await _reserve(store, _FIRST, _SECOND, _THIRD, _BY_HAND)
    db: Any = store._db
    await db.count(Sql("DELETE FROM deliveries WHERE id {in:ids}"), ids=[_FIRST, _BY_HAND])
    assert await _job_ids(store) == [
        f"{_SECOND}:crm",
        f"{_SECOND}:mail",
        f"{_THIRD}:crm",
        f"{_THIRD}:mail",
    ]


async def test_a_journal_purge_takes_only_the_jobs_of_the_rows_it_purges(store: Store) -> None:
    """The second delivery's jobs are unfinished: its row is held, and the jobs of its
    neighbours in the same millisecond go with theirs."""
    await _reserve(store, _FIRST, _SECOND, _THIRD)
    claimed = await store.queue.claim_due_jobs("w", 6, 30)
    await store.queue.settle_jobs(
        [
            Settlement(j.id, j.lease_token, "completed")
            for j in claimed
            if not j.id.startswith(_SECOND)
        ]
    )
    await asyncio.sleep(0.01)
    assert await store.retention.purge_deliveries(0, 10) == 2
    assert await _job_ids(store) == [f"{_SECOND}:crm", f"{_SECOND}:mail"]
