"""The host application's own database (here a SQLite file and a session factory, as an
application would have with SQLAlchemy's ``sessionmaker``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class ShopDb:
    def __init__(self, path: str) -> None:
        self.path = path

    def create_schema(self) -> None:
        with self.session() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS orders (invoice TEXT PRIMARY KEY, customer TEXT,"
                " amount_cents INTEGER, paid_by_event TEXT)"
            )

    @contextmanager
    def session(self) -> Iterator[sqlite3.Connection]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        connection = sqlite3.connect(self.path)
        try:
            with connection:
                yield connection
        finally:
            connection.close()

    def orders(self) -> list[dict[str, Any]]:
        with self.session() as db:
            rows = db.execute("SELECT invoice, customer, amount_cents, paid_by_event FROM orders")
            keys = ("invoice", "customer", "amount_cents", "paid_by_event")
            return [dict(zip(keys, row, strict=True)) for row in rows]
