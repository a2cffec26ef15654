"""The SQL dialects: ``:name`` placeholders and each macro, rendered and run on both stores.

Statements are written once (hookinbox.store.dialect); these tests prove each macro means
the same on SQLite and PostgreSQL by running it on the real database behind the test's
store. They reach the store's driver (``store._db``) on purpose: the macros are below the
store's contract.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hookinbox.store import Store
from hookinbox.store.dialect import POSTGRES, SQLITE
from hookinbox.store.sql import Sql, rows
from tests.store.test_contract import new_delivery


def test_postgres_numbers_named_placeholders_once_each_and_leaves_quotes_and_casts() -> None:
    sql = Sql(
        "SELECT :b, :a, :b, ':not_a_param', x::int, \"col:umn\" -- :neither\n"
        "FROM t WHERE y = ANY(:ids::text[])"
    )
    rendered = POSTGRES.render(sql)
    assert rendered.text == (
        "SELECT $1, $2, $1, ':not_a_param', x::int, \"col:umn\" -- :neither\n"
        "FROM t WHERE y = ANY($3::text[])"
    )
    assert rendered.names == ("b", "a", "ids")
    assert POSTGRES.render(sql) is rendered  # rendered once, then cached


def test_sqlite_binds_by_name() -> None:
    rendered = SQLITE.render(Sql("SELECT :b, :a, :b"))
    assert (rendered.text, rendered.names) == ("SELECT :b, :a, :b", ())


@pytest.mark.parametrize(
    ("macro", "postgres", "sqlite"),
    [
        ("{now}", "now()", "((julianday('now') - 2440587.5) * 86400.0)"),
        ("{secs:x}", "make_interval(secs => $1)", ":x"),
        ("{in:x}", "= ANY($1)", "IN (SELECT value FROM json_each(:x))"),
        ("{for_update}", "FOR UPDATE", ""),
        ("{skip_locked}", "FOR UPDATE SKIP LOCKED", ""),
        ("{skip_locked:p}", "FOR UPDATE OF p SKIP LOCKED", ""),
        ("{collate:C}", 'COLLATE "C"', ""),
    ],
)
def test_each_macro_renders_per_dialect(macro: str, postgres: str, sqlite: str) -> None:
    assert POSTGRES.render(Sql(macro)).text == postgres
    assert SQLITE.render(Sql(macro)).text == sqlite


def test_an_unknown_macro_fails_at_render_not_at_run_time() -> None:
    with pytest.raises(KeyError):
        SQLITE.render(Sql("SELECT {nope}"))


async def _value(store: Store, text: str, **params: Any) -> Any:
    return await store._db.value(Sql(text), **params)


def _near(moment: datetime | None, expected: datetime, seconds: float = 5) -> bool:
    return moment is not None and abs((moment - expected).total_seconds()) < seconds


async def test_the_clock_macros_mean_the_same_on_both_stores(store: Store) -> None:
    decode = store._db.decode_time
    wall = datetime.now(UTC)
    assert _near(decode(await _value(store, "SELECT {now}")), wall)
    later = decode(await _value(store, "SELECT {now} + {secs:x}", x=3600.0))
    assert _near(later, wall + timedelta(hours=1))
    age = await _value(store, "SELECT {age:t} FROM (SELECT {now} - {secs:x} AS t) q", x=90.0)
    assert 89 <= float(age) < 95
    minute = await _value(store, "SELECT {minute:t} FROM (SELECT {now} AS t) q")
    assert abs(int(minute) - int(time.time() // 60)) <= 1
    # A time parameter is bound in the store's own time type.
    assert (
        await _value(
            store,
            "SELECT count(*) FROM (SELECT {now} AS t) q WHERE t > :at",
            at=wall - timedelta(minutes=1),
        )
        == 1
    )


async def test_list_parameters_and_table_checks(store: Store) -> None:
    letters = "(SELECT 'a' AS v UNION ALL SELECT 'b' UNION ALL SELECT 'c') q"
    assert (
        await _value(store, f"SELECT count(*) FROM {letters} WHERE v {{in:x}}", x=["a", "c"]) == 2
    )
    assert await _value(store, f"SELECT count(*) FROM {letters} WHERE v {{in:x}}", x=[]) == 0
    assert await _value(store, "SELECT {table_exists:t}", t="jobs")
    assert not await _value(store, "SELECT {table_exists:t}", t="no_such_table")


async def test_job_states_and_locking_clauses_run_on_both_stores(store: Store) -> None:
    item = new_delivery("e1", actions=("b", "a"))
    await store.journal.reserve_deliveries([item])
    (job,) = await store.queue.claim_due_jobs("w", 1, 30)
    states = await _value(
        store, "SELECT {job_states} FROM deliveries d WHERE d.id = :id", id=item.id
    )
    # Ordered by action: "a", then "b".
    assert states == ",".join("processing" if a == job.action else "accepted" for a in "ab")

    def locked() -> Any:
        found = yield rows(
            Sql("SELECT j.id FROM jobs j WHERE j.delivery_id = :id ORDER BY j.id {skip_locked:j}"),
            id=item.id,
        )
        again = yield rows(Sql("SELECT id FROM jobs WHERE id = :id {for_update}"), id=job.id)
        return len(found), len(again)

    assert await store._db.run(locked()) == (2, 1)
