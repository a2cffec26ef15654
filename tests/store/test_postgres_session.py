"""What every PostgreSQL connection of the store sets for its session. They reach the
store's driver on purpose: session settings are below the store's contract."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from hookinbox.store import open_store_for
from hookinbox.store.sql import Sql
from tests.store.test_contract import new_delivery
from tests.support.database import pg_schema_url


def test_no_connection_of_the_store_compiles_its_statements_with_jit() -> None:
    """A payload search is planned at millions of cost units (its JSON function's declared
    cost per row of the window): with JIT, compiling it took longer than the scan."""
    with pg_schema_url() as url:

        async def scenario() -> list[str]:
            store = open_store_for(url)
            await store.open()
            try:
                db = store._db  # type: ignore[attr-defined]
                # Several at once: each on a connection of its own from the pool.
                pooled = await asyncio.gather(*(db.value(Sql("SHOW jit")) for _ in range(3)))
                planned_once = await db.rows_planned_once(Sql("SHOW jit"))
                return [*pooled, planned_once[0]["jit"]]
            finally:
                await store.close()

        assert asyncio.run(scenario()) == ["off"] * 4


def test_a_body_too_large_for_its_row_is_compressed_with_lz4() -> None:
    """Every connection compresses values too large for a row with lz4 (PostgreSQL 14+):
    pglz cost the receive statement a third of its CPU at 3 kB bodies."""
    with pg_schema_url() as url:

        async def scenario() -> tuple[list[str], str]:
            store = open_store_for(url)
            await store.open()
            try:
                db = store._db  # type: ignore[attr-defined]
                show = Sql("SHOW default_toast_compression")
                pooled = await asyncio.gather(*(db.value(show) for _ in range(3)))
                planned_once = await db.rows_planned_once(show)
                body = b'{"line": "an invoice line of a large event"}\n' * 200
                item = replace(new_delivery("large"), body=body)
                await store.journal.reserve_deliveries([item])
                method = await db.value(
                    Sql("SELECT pg_column_compression(body) FROM payloads WHERE delivery_id = :id"),
                    id=item.id,
                )
                return [*pooled, planned_once[0]["default_toast_compression"]], method
            finally:
                await store.close()

        settings, method = asyncio.run(scenario())
        assert settings == ["lz4"] * 4
        assert method == "lz4"
