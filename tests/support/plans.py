"""Query plans of the store's statements, on both databases, read with scans disabled as
far as the database allows: a lookup that cannot use an index then shows as a scan of
the whole table. They reach the store's driver on purpose: plans are below the store's
contract."""

from __future__ import annotations

import re
from typing import Any

from hookinbox.store import Store
from hookinbox.store.dialect import POSTGRES
from hookinbox.store.sql import Sql, Tx, rows


def _pg_plan(statement: Sql, params: dict[str, Any]) -> Tx[list[str]]:
    # Inside one transaction: the settings end with it.
    for setting in ("enable_seqscan", "enable_hashjoin", "enable_mergejoin"):
        yield rows(Sql(f"SET LOCAL {setting} = off"))
    found = yield rows(Sql("EXPLAIN " + statement.text), **params)
    return [str(r["QUERY PLAN"]) for r in found]


async def query_plan(store: Store, statement: Sql, params: dict[str, Any]) -> list[str]:
    """The plan's lines: PostgreSQL's ``EXPLAIN``, SQLite's ``EXPLAIN QUERY PLAN``."""
    db: Any = store._db
    if db.dialect is POSTGRES:
        return await db.run(_pg_plan(statement, params))
    found = await db.rows(Sql("EXPLAIN QUERY PLAN " + statement.text), **params)
    return [str(r["detail"]) for r in found]


async def chosen_plan(store: Store, statement: Sql, params: dict[str, Any]) -> list[str]:
    """The plan as the planner picks it, nothing disabled: for a join it must not pick,
    whatever it estimates (PostgreSQL hashing every job by its delivery id)."""
    db: Any = store._db
    if db.dialect is POSTGRES:
        found = await db.rows(Sql("EXPLAIN " + statement.text), **params)
        return [str(r["QUERY PLAN"]) for r in found]
    return await query_plan(store, statement, params)


def scans_whole(plan: list[str], table: str, alias: str) -> bool:
    """PostgreSQL: ``Seq Scan on jobs j``, or on one of its partitions
    (``Seq Scan on jobs_p20261205 j_1``, ``jobs_default j_5``); SQLite: ``SCAN j`` or
    ``SCAN jobs`` (a search by index is ``SEARCH j USING INDEX ...``; ``SCAN json_each``
    is a list parameter, not the table)."""
    partition = re.compile(
        rf"Seq Scan on {re.escape(table)}_(p\d{{8}}|default) {re.escape(alias)}(_\d+)?(\s|$)"
    )
    sqlite_scan = re.compile(rf"SCAN ({re.escape(alias)}|{re.escape(table)})(\s|$)")
    return any(
        f"Seq Scan on {table} {alias}" in line
        or partition.search(line) is not None
        or sqlite_scan.match(line.strip()) is not None
        for line in plan
    )
