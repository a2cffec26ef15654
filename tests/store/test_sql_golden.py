"""Every statement the store runs, rendered per database, is checked in.

``tests/store/sql/sqlite.sql`` and ``tests/store/sql/postgres.sql`` hold each statement of
the store's ``.sql`` files with its fragments and dialect macros resolved, as that
database runs it: a change of SQL is a diff of real SQL. After changing a statement,
regenerate them and review the diff:

    HOOKINBOX_RENDER_SQL=1 .venv/bin/python -m pytest tests/store/test_sql_golden.py -p no:xdist
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hookinbox.store.dialect import POSTGRES, SQLITE, Dialect
from hookinbox.store.statements import parse_statements, render_all

GOLDEN = Path(__file__).parent / "sql"


@pytest.mark.parametrize("dialect", [SQLITE, POSTGRES], ids=lambda d: d.name)
def test_rendered_statements_match_the_golden_file(dialect: Dialect) -> None:
    path = GOLDEN / f"{dialect.name}.sql"
    rendered = render_all(dialect)
    if os.environ.get("HOOKINBOX_RENDER_SQL"):
        path.write_text(rendered, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == rendered, (
        f"{path} is not what the store runs: regenerate it (see this module's docstring)"
        " and review the diff"
    )


def test_a_changed_statement_no_longer_matches() -> None:
    """The comparison above sees a change of one statement (here: one condition)."""
    golden = (GOLDEN / "sqlite.sql").read_text(encoding="utf-8")
    assert "WHERE key = :key" in golden
    changed = parse_statements(
        "effects", "-- name: get\nSELECT key FROM effects WHERE key <> :key;\n"
    )["get"]
    assert SQLITE.render(changed).text not in golden


def test_fragments_are_included_and_docs_are_not_part_of_the_statement() -> None:
    found = parse_statements(
        "area",
        "-- header\n\n-- fragment: live\nstate = 'processing'\n\n"
        "-- name: leased\n-- the leased jobs\nSELECT id FROM jobs WHERE {include:live};\n",
    )
    assert list(found) == ["leased"]
    assert found["leased"].name == "area.leased"
    assert found["leased"].text == "SELECT id FROM jobs WHERE state = 'processing'"


def test_a_statement_defined_twice_or_a_missing_fragment_fails_the_load() -> None:
    with pytest.raises(ValueError, match="defined twice"):
        parse_statements("area", "-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")
    with pytest.raises(ValueError, match="no fragment"):
        parse_statements("area", "-- name: a\nSELECT {include:nope};\n")
