"""Stores: pick one by the database URL."""

from __future__ import annotations

from hookinbox.store.base import Store


def open_store_for(url: str) -> Store:
    """The store for ``url``, not yet opened: ``sqlite:///PATH`` or ``postgresql://...``."""
    if url.startswith("sqlite:"):
        from hookinbox.store.sqlite import SQLiteStore

        return SQLiteStore(url)
    from hookinbox.store.postgres import PostgresStore

    return PostgresStore(url)


__all__ = ["Store", "open_store_for"]
