"""Statements and transactions, written once for both databases.

A statement is an :class:`Sql` read from a ``.sql`` file of named statements
(:mod:`hookinbox.store.statements`): named placeholders (``:job_id``) for every value and
a few dialect macros in braces (``{now}``, ``{secs:lease}``, ``{in:ids}``; see
:mod:`hookinbox.store.dialect`). Nothing is formatted into SQL (callers pick a statement
by name and pass values as parameters) but a day's first id, for PostgreSQL's partitions
(:func:`pinned`).

A transaction is a generator (:data:`Tx`) that yields :class:`Step` objects (a statement,
its parameters and what to fetch) and receives each step's result; it returns the
operation's answer. It does no I/O itself, so the same code runs synchronously on the
SQLite writer thread between ``BEGIN IMMEDIATE`` and ``COMMIT`` (no other coroutine's
statement can interleave) and awaited on one pooled PostgreSQL connection inside
``conn.transaction()``. See docs/store.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeAlias, TypeVar

from hookinbox.errors import StoreError

T = TypeVar("T")

#: A result row: ``sqlite3.Row`` and ``asyncpg.Record`` both answer ``row["column"]``.
Row: TypeAlias = Mapping[str, Any]

#: The driver's time decoder: SQLite's REAL unix seconds or PostgreSQL's timestamptz in,
#: a timezone-aware UTC datetime (or None) out.
DecodeTime: TypeAlias = Callable[[Any], datetime | None]

Fetch = Literal["rows", "row", "value", "count", "many", "wake"]


class Sql:
    """One statement's text, rendered once per dialect (the dialect caches it, keyed by
    the object itself: statements are read once from the store's ``.sql`` files by
    :func:`hookinbox.store.statements.load_statements`, never built per call). ``name``
    is ``area.statement``, as the golden files show it."""

    __slots__ = ("name", "text")

    def __init__(self, text: str, name: str = "") -> None:
        self.text = text
        self.name = name

    def __repr__(self) -> str:
        return f"Sql({self.name or self.text!r})"


#: What :func:`pinned` writes into a statement: a day's first delivery id, or nothing.
_PINNABLE = re.compile(r"(?:dlv_[0-9a-f]{12})?")


def pinned(sql: Sql, name: str, value: str) -> Sql:
    """``sql`` with its parameter ``name`` written in as a constant. The one exception
    to "nothing is formatted into SQL", for PostgreSQL's partitions: a constant prunes
    the days a statement cannot touch when its plan is made, a parameter of a plan made
    once only when it runs, after every day was locked. Only a day's first id (or the
    empty string) is written; anything else is refused."""
    if not _PINNABLE.fullmatch(value):
        raise StoreError(f"{sql.name}: {name} is not a day's first id")
    return Sql(re.sub(rf":{name}\b", f"'{value}'", sql.text), sql.name)


@dataclass(slots=True)
class Step:
    """A statement to run inside a transaction, and what to send back for it:
    ``rows`` (a list), ``row`` (the first or None), ``value`` (its first column or None),
    ``count`` (rows changed), ``many`` (one run per parameter set; back: the rows changed
    in all where the driver can tell, SQLite, else None)."""

    sql: Sql
    params: Any
    fetch: Fetch
    #: A unique violation is thrown into the transaction as :class:`UniqueConflict`
    #: (the statement alone is undone) instead of failing it.
    unique_conflict: bool = False
    #: Seconds the statement may take where the driver can bound it (PostgreSQL); None:
    #: the driver's default.
    timeout: float | None = None


class UniqueConflict(Exception):
    """A statement run with ``unique_conflict`` hit a unique index."""


#: The transactions' type: yields steps, is sent their results, returns the answer.
Tx: TypeAlias = Generator[Step, Any, T]

#: Wake this process's and every other process's workers once the transaction commits
#: (PostgreSQL: ``pg_notify`` inside it; SQLite: the in-process event after COMMIT).
WAKE = Step(Sql(""), None, "wake")


def rows(sql: Sql, **params: Any) -> Step:
    return Step(sql, params, "rows")


def row(sql: Sql, **params: Any) -> Step:
    return Step(sql, params, "row")


def value(sql: Sql, **params: Any) -> Step:
    return Step(sql, params, "value")


def count(sql: Sql, **params: Any) -> Step:
    return Step(sql, params, "count")


def many(sql: Sql, param_sets: Sequence[Mapping[str, Any]]) -> Step:
    return Step(sql, list(param_sets), "many")


class Drive:
    """One transaction being run by a driver: the step to execute next, until it is done.

    The driver executes :attr:`step` and gives its result to :meth:`feed` (a
    :class:`UniqueConflict` instance is thrown into the transaction instead)."""

    __slots__ = ("_tx", "answer", "done", "step", "woke")

    def __init__(self, tx: Tx[Any]) -> None:
        self._tx = tx
        self.done = False
        self.answer: Any = None
        #: The transaction asked for :data:`WAKE`.
        self.woke = False
        self.step = WAKE
        self.feed(None)  # a fresh generator takes None: it runs to its first step

    def feed(self, result: Any) -> None:
        # Runs once per statement on the hot path: no closures, no extra calls.
        try:
            if isinstance(result, UniqueConflict):
                step = self._tx.throw(result)
            else:
                step = self._tx.send(result)
        except StopIteration as stop:
            self.done, self.answer = True, stop.value
            return
        self.step = step
        if step.fetch == "wake":
            self.woke = True


def one_step(step: Step) -> Tx[Any]:
    """A transaction of one statement (how single reads and writes run)."""
    return (yield step)


__all__ = [
    "WAKE",
    "DecodeTime",
    "Drive",
    "Row",
    "Sql",
    "Step",
    "Tx",
    "UniqueConflict",
    "count",
    "many",
    "one_step",
    "row",
    "rows",
    "value",
]
