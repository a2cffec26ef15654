"""The schema is the same on both databases: every table, column (and whether it may be
NULL), primary key and index, after every migration, whichever database holds it
(PostgreSQL's payload and attempt partitions are their table's storage, not tables of it)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import asyncpg

from hookinbox.store.dialect import POSTGRES, SQLITE
from hookinbox.store.migrations import load_migrations
from tests.support.database import pg_schema_url

Catalog = dict[str, dict[str, object]]


def sqlite_catalog(path: Path) -> Catalog:
    conn = sqlite3.connect(path)
    for migration in load_migrations("hookinbox.store.sqlite", SQLITE):
        conn.executescript(migration.sql)
    catalog: Catalog = {}
    tables = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    for (table,) in tables:
        columns = conn.execute(f"PRAGMA table_info({table})").fetchall()
        indexes = {
            name: (bool(unique), tuple(c[2] for c in conn.execute(f"PRAGMA index_info({name})")))
            for _, name, unique, origin, _ in conn.execute(f"PRAGMA index_list({table})")
            if origin == "c"  # made by CREATE INDEX (keys and UNIQUE constraints are below)
        }
        catalog[table] = {
            # A primary key is never NULL on PostgreSQL; SQLite, by a legacy quirk, lets a
            # non-INTEGER one be (hookinbox never writes one): read it as PostgreSQL does.
            "columns": {name: not (notnull or pk) for _, name, _, notnull, _, pk in columns},
            "primary_key": tuple(c[1] for c in sorted(columns, key=lambda c: c[5]) if c[5]),
            "indexes": indexes,
        }
    conn.close()
    return catalog


async def postgres_catalog(url: str) -> Catalog:
    conn = await asyncpg.connect(url)
    try:
        for migration in load_migrations("hookinbox.store.postgres", POSTGRES):
            await conn.execute(migration.sql)
        schema = await conn.fetchval("SELECT current_schema()")
        # PostgreSQL's payload partitions (one per day) are the payloads table's storage.
        partitions = {
            r["relname"]
            for r in await conn.fetch(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = $1 AND c.relispartition",
                schema,
            )
        }
        catalog: Catalog = {}
        columns = await conn.fetch(
            "SELECT table_name, column_name, is_nullable = 'YES' AS nullable"
            " FROM information_schema.columns WHERE table_schema = $1",
            schema,
        )
        for row in columns:
            if row["table_name"] in partitions:
                continue
            table = catalog.setdefault(
                row["table_name"], {"columns": {}, "primary_key": (), "indexes": {}}
            )
            table["columns"][row["column_name"]] = row["nullable"]  # type: ignore[index]
        indexes = await conn.fetch(
            "SELECT t.relname AS table_name, i.relname AS index_name, x.indisunique AS unique,"
            " x.indisprimary AS primary, c.conname IS NOT NULL AS constraint,"
            " array(SELECT a.attname FROM unnest(x.indkey) WITH ORDINALITY k(n, o)"
            "       JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.n"
            "       ORDER BY k.o) AS columns"
            " FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
            " JOIN pg_class t ON t.oid = x.indrelid"
            " JOIN pg_namespace n ON n.oid = t.relnamespace"
            " LEFT JOIN pg_constraint c ON c.conindid = x.indexrelid"
            " WHERE n.nspname = $1",
            schema,
        )
        keyed_by_id: set[str] = set()
        for row in indexes:
            if row["table_name"] in partitions:
                if tuple(row["columns"]) == ("id",):
                    keyed_by_id.add(row["table_name"])
                continue
            table = catalog[row["table_name"]]
            if row["primary"]:
                table["primary_key"] = tuple(row["columns"])
            elif not row["constraint"]:
                table["indexes"][row["index_name"]] = (  # type: ignore[index]
                    row["unique"],
                    tuple(row["columns"]),
                )
        # A partitioned table's unique index must hold its partition key: PostgreSQL's
        # attempts (partitioned by job) have no key of their own, an index on id in each
        # partition instead (ids from one sequence). That stands for SQLite's key.
        attempt_parts = {
            r["relname"]
            for r in await conn.fetch(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                " WHERE i.inhparent = 'attempts'::regclass"
            )
        }
        assert attempt_parts and attempt_parts <= keyed_by_id, attempt_parts - keyed_by_id
        assert catalog["attempts"]["primary_key"] == ()
        catalog["attempts"]["primary_key"] = ("id",)
        return catalog
    finally:
        await conn.close()


def test_every_table_column_key_and_index_is_the_same_on_both_databases(tmp_path: Path) -> None:
    on_sqlite = sqlite_catalog(tmp_path / "schema.db")
    with pg_schema_url() as url:
        on_postgres = asyncio.run(postgres_catalog(url))
    # The migrations' own bookkeeping is each driver's, not a migration's.
    assert on_sqlite.keys() == on_postgres.keys()
    # The one index only SQLite has: its foreign key's cascade from deliveries looks jobs
    # up by delivery_id, where PostgreSQL's reads and cascade take the range of a
    # delivery's job ids in jobs_pkey (migration 030).
    assert on_sqlite["jobs"]["indexes"].pop("jobs_delivery_idx") == (False, ("delivery_id",))  # type: ignore[attr-defined]
    assert "jobs_delivery_idx" not in on_postgres["jobs"]["indexes"]  # type: ignore[operator]
    for table in on_sqlite:
        assert on_sqlite[table] == on_postgres[table], table
    assert {"deliveries", "jobs", "attempts", "effects", "outbox"} <= on_sqlite.keys()
