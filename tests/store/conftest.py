"""Fixtures of the store's PostgreSQL-only tests (partitions, migrations)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from hookinbox.store import Store, open_store_for
from tests.support.database import pg_schema_url


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL schema of the test's own."""
    with pg_schema_url() as url:
        yield url


@pytest.fixture
async def pg_store(pg_url: str) -> AsyncIterator[Store]:
    """A store opened (migrated) on :func:`pg_url`."""
    store = open_store_for(pg_url)
    await store.open()
    try:
        yield store
    finally:
        await store.close()
