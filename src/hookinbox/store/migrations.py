"""Numbered schema migrations, applied in order, each once: ``NNN_name.sql``.

Most are written once for both databases in ``store/schema/`` with the dialect's type
macros (:meth:`~hookinbox.store.dialect.Dialect.render_schema`), so the tables, columns
and indexes are the same on SQLite and PostgreSQL by construction. A migration only one
database needs (a PostgreSQL partitioning, say) lives in its driver package,
``<driver>/migrations/NNN_name.sql``; a number is used once across both places.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable

from hookinbox.store.dialect import Dialect


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def _sql_files(folder: Traversable) -> list[tuple[int, str, str]]:
    if not folder.is_dir():
        return []
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name.removesuffix(".sql"), entry.read_text()))
    return found


def load_migrations(package: str, dialect: Dialect) -> list[Migration]:
    """The migrations of a driver package (``hookinbox.store.sqlite``): the shared ones,
    rendered for ``dialect``, and the driver's own, in version order."""
    shared = _sql_files(resources.files("hookinbox.store").joinpath("schema"))
    own = _sql_files(resources.files(package).joinpath("migrations"))
    found = [Migration(v, n, dialect.render_schema(sql)) for v, n, sql in shared]
    found += [Migration(v, n, sql) for v, n, sql in own]
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"two {package} migrations share a number: {versions}")
    return found
