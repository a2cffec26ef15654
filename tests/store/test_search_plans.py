"""How a payload search reaches its rows, on both stores.

A search with a payload filter reads the retained bodies of its window and looks each
match's delivery up; every delivery it lists shows its jobs' states. On PostgreSQL
``deliveries.id`` is COLLATE "C" and the columns pointing at it are plain text: a lookup
that names no collation cannot use ``jobs_delivery_idx`` or ``payloads_pkey``, and the
search scanned all of ``jobs`` for every delivery it walked (over 100,000 bodies it did
not finish in 300 s; docs/performance.md, "Cost growth"). The plans are read with scans
disabled as far as the database allows, so a lookup that cannot use an index shows as a
scan of the whole table. They reach the store's driver on purpose: plans are below the
store's contract.
"""

from __future__ import annotations

from typing import Any

import pytest

from hookinbox.store import Store
from hookinbox.store.journal import _SQL
from hookinbox.store.sql import Sql
from tests.support.plans import query_plan, scans_whole

_PARAMS: dict[str, Any] = {
    "floor": "dlv_0",
    "ceiling": None,
    "needle": b"cus_1",
    "payload_path": "data.customer",
    "payload_value": '"cus_1"',
    "type": None,
    "source": None,
    # A status filter: each delivery walked is checked against its jobs.
    "status": "completed",
    "before": None,
    "limit": 50,
    "cap": 1000,
}


async def _plan(store: Store, statement: Sql) -> list[str]:
    """``statement``'s plan with the parameters it names."""
    rendered = store._db.dialect.render(statement)  # type: ignore[attr-defined]
    params = {
        key: value
        for key, value in _PARAMS.items()
        if key in rendered.names or f":{key}" in rendered.text
    }
    return await query_plan(store, statement, params)


@pytest.mark.parametrize("name", ["search_by_payload", "count_search_by_payload"])
async def test_a_payload_search_finds_jobs_and_payloads_by_index(store: Store, name: str) -> None:
    statement = _SQL[name]
    plan = await _plan(store, statement)
    assert not scans_whole(plan, "jobs", "j"), plan
    assert not scans_whole(plan, "deliveries", "d"), plan


async def test_a_payload_search_page_finds_its_matches_first_then_looks_each_up(
    store: Store,
) -> None:
    """A page of a payload search, newest first, with a LIMIT: the planner, expecting
    hundreds of matches, walked the window's journal backward against them (a second of a
    search over a million bodies); found first, each match is one lookup by key."""
    statement = _SQL["search_by_payload"]
    plan = await _plan(store, statement)
    # PostgreSQL: the matches an InitPlan's array, each looked up in deliveries_pkey;
    # SQLite: the journal searched by key for each row of the list subquery.
    looked_up = [
        line
        for line in plan
        if "Index Cond: ((id = ANY" in line or line.startswith("SEARCH d USING INDEX")
    ]
    assert looked_up, plan
    assert not scans_whole(plan, "deliveries", "d"), plan
