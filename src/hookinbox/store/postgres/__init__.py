"""The PostgreSQL driver (production); only :func:`hookinbox.store.open_store_for` uses it."""

from hookinbox.store.postgres.driver import PostgresDriver

__all__ = ["PostgresDriver"]
