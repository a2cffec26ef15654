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
from hookinbox.store.dialect import POSTGRES
from hookinbox.store.journal import _SQL
from hookinbox.store.sql import Sql, Tx, rows

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


def _pg_plan(statement: Sql, params: dict[str, Any]) -> Tx[list[str]]:
    # Inside one transaction: the settings end with it.
    for setting in ("enable_seqscan", "enable_hashjoin", "enable_mergejoin"):
        yield rows(Sql(f"SET LOCAL {setting} = off"))
    found = yield rows(Sql("EXPLAIN " + statement.text), **params)
    return [str(r["QUERY PLAN"]) for r in found]


async def _plan(store: Store, statement: Sql, params: dict[str, Any]) -> list[str]:
    db: Any = store._db
    if db.dialect is POSTGRES:
        return await db.run(_pg_plan(statement, params))
    found = await db.rows(Sql("EXPLAIN QUERY PLAN " + statement.text), **params)
    return [str(r["detail"]) for r in found]


def _scans_whole(plan: list[str], table: str, alias: str) -> bool:
    """PostgreSQL: ``Seq Scan on jobs j``; SQLite: ``SCAN j`` (a search by index is
    ``SEARCH j USING INDEX ...``)."""
    return any(
        f"Seq Scan on {table} {alias}" in line or line.strip().startswith(f"SCAN {alias}")
        for line in plan
    )


@pytest.mark.parametrize("name", ["search_by_payload", "count_search_by_payload"])
async def test_a_payload_search_finds_jobs_and_payloads_by_index(store: Store, name: str) -> None:
    statement = _SQL[name]
    rendered = store._db.dialect.render(statement)  # type: ignore[attr-defined]
    params = {
        key: value
        for key, value in _PARAMS.items()
        if key in rendered.names or f":{key}" in rendered.text
    }
    plan = await _plan(store, statement, params)
    assert not _scans_whole(plan, "jobs", "j"), plan
    assert not _scans_whole(plan, "deliveries", "d"), plan
