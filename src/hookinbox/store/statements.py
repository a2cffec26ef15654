"""The store's SQL: ``.sql`` files of named statements, read once, at import.

Each store area has one portable file (``store/queries/AREA.sql``, both databases) and
what only PostgreSQL runs is in ``store/postgres/AREA.sql``. A file is a header comment,
then blocks (the format of procrastinate's ``sql/queries.sql``)::

    -- name: claim_due
    -- What the statement is for (comment lines right after the name are its doc).
    SELECT id FROM jobs WHERE next_attempt_at <= {now} LIMIT :limit;

A block named ``-- fragment: NAME`` is not a statement: the blocks of the same file
include it with ``{include:NAME}``, so a condition many statements share is written once.
The golden files (``tests/store/sql/*.sql``) show every statement with its fragments
and macros resolved, as each database runs it.

Loading renders every statement for each dialect its file is for (both for a portable
file, PostgreSQL for its own), so a misspelt macro fails the import, not a request, and
no rendering is left for the hot path.
"""

from __future__ import annotations

import re
from importlib.resources import files

from hookinbox.store.dialect import POSTGRES, SQLITE, Dialect
from hookinbox.store.sql import Sql

_BLOCK = re.compile(r"^-- (name|fragment): ([a-z][a-z0-9_]*)[ \t]*\n", re.MULTILINE)
_DOC = re.compile(r"\A(?:--[^\n]*\n)*")
_INCLUDE = re.compile(r"\{include:([a-z][a-z0-9_]*)\}")

#: Where the files are: (package, dialects its statements are rendered for).
_PORTABLE = ("hookinbox.store", "queries", (SQLITE, POSTGRES))
_POSTGRES_ONLY = ("hookinbox.store.postgres", "", (POSTGRES,))

_LOADED: dict[str, dict[str, Sql]] = {}


def parse_statements(area: str, text: str) -> dict[str, Sql]:
    """The statements of one file, fragments included, by name (``area.name`` is each
    one's :attr:`Sql.name`)."""
    parts = _BLOCK.split(text)
    fragments: dict[str, str] = {}
    bodies: dict[str, str] = {}
    for kind, name, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        statement = _DOC.sub("", body, count=1).strip().removesuffix(";").rstrip()
        target = fragments if kind == "fragment" else bodies
        if name in fragments or name in bodies:
            raise ValueError(f"{area}.sql: {name!r} is defined twice")
        target[name] = statement

    def include(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in fragments:
            raise ValueError(f"{area}.sql: no fragment {name!r}")
        return _INCLUDE.sub(include, fragments[name])

    return {
        name: Sql(_INCLUDE.sub(include, body), f"{area}.{name}") for name, body in bodies.items()
    }


def _read(package: str, folder: str, area: str) -> str:
    root = files(package)
    return (root / folder / f"{area}.sql" if folder else root / f"{area}.sql").read_text("utf-8")


def _load(where: tuple[str, str, tuple[Dialect, ...]], area: str, key: str) -> dict[str, Sql]:
    found = _LOADED.get(key)
    if found is None:
        package, folder, dialects = where
        found = _LOADED[key] = parse_statements(area, _read(package, folder, area))
        for sql in found.values():
            for dialect in dialects:
                dialect.render(sql)
    return found


def load_statements(area: str) -> dict[str, Sql]:
    """The portable statements of ``store/queries/AREA.sql``, rendered for both
    databases."""
    return _load(_PORTABLE, area, area)


def load_postgres_statements(area: str) -> dict[str, Sql]:
    """PostgreSQL's own statements, ``store/postgres/AREA.sql``."""
    return _load(_POSTGRES_ONLY, area, f"postgres/{area}")


def areas() -> tuple[list[str], list[str]]:
    """The names of the portable files and of PostgreSQL's own, sorted."""

    def names(package: str, folder: str) -> list[str]:
        root = files(package)
        where = root / folder if folder else root
        return sorted(
            p.name.removesuffix(".sql") for p in where.iterdir() if p.name.endswith(".sql")
        )

    return names(*_PORTABLE[:2]), names(*_POSTGRES_ONLY[:2])


def render_all(dialect: Dialect) -> str:
    """Every statement ``dialect`` runs, as it runs it, one block each, by area and name
    (the golden files' content). PostgreSQL's blocks list their ``$n`` parameters."""
    portable, postgres_only = areas()
    statements = [sql for area in portable for sql in load_statements(area).values()]
    if dialect is POSTGRES:
        statements += [
            sql for area in postgres_only for sql in load_postgres_statements(area).values()
        ]
    blocks = []
    for sql in sorted(statements, key=lambda each: each.name):
        rendered = dialect.render(sql)
        head = f"-- name: {sql.name}\n"
        if rendered.names:
            head += (
                "-- params: "
                + ", ".join(f"${n} {name}" for n, name in enumerate(rendered.names, 1))
                + "\n"
            )
        blocks.append(f"{head}{rendered.text};\n")
    return (
        f"-- Every statement {dialect.name} runs, rendered (tests/store/test_sql_golden.py).\n\n"
        + "\n".join(blocks)
    )
