"""Numbered SQL migrations per driver: ``<driver>/migrations/NNN_name.sql``, in order, once.

Each driver package keeps its own schema (the types differ: REAL unix seconds and
INTEGER flags on SQLite, timestamptz and boolean on PostgreSQL); the tables, columns and
indexes are the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations(package: str) -> list[Migration]:
    """The migrations of a driver package (``hookinbox.store.sqlite``), in version order."""
    folder = resources.files(package).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append(Migration(version, entry.name.removesuffix(".sql"), entry.read_text()))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"two {package} migrations share a number: {versions}")
    return found
