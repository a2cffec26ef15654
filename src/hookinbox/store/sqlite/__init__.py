"""The SQLite driver (embedded default); only :func:`hookinbox.store.open_store_for` uses it."""

from hookinbox.store.sqlite.driver import SQLiteDriver

__all__ = ["SQLiteDriver"]
