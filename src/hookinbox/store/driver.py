"""What a database driver gives the store: open, run, wake, and what its errors mean.

A driver knows one database: how to connect, run a transaction (:data:`~hookinbox.store.
sql.Tx`) of rendered statements and map its errors, how to wake workers, its migrations
and its time type. It knows nothing of deliveries, jobs or resources: that logic is
written once, in the store's concept modules (the hot path too:
:mod:`hookinbox.store.hot_path`), over :meth:`Driver.run`; import-linter checks that no
driver imports it.

Errors are wrapped where they happen: a connection failure, a failed commit or a
shutdown is :class:`~hookinbox.errors.StoreUnavailable` (the receiver answers 503 and the
provider retries); any other database error is :class:`~hookinbox.errors.StoreError`.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from hookinbox.errors import StoreError, StoreRejectedRow
from hookinbox.store.dialect import Dialect
from hookinbox.store.sql import Row, Sql, Step, Tx, one_step

T = TypeVar("T")


@dataclass(slots=True)
class WriteClock:
    """Seconds this task's transactions held the database's write lock, from the moment
    it was granted to the commit (SQLite only: PostgreSQL has no single writer, and its
    driver leaves the clock alone). A writer that paces itself on another's behalf (the
    purge) reads it, where its own wall time would also count the waits for the lock."""

    held: float = 0.0
    transactions: int = 0


_WRITE_CLOCK: ContextVar[WriteClock | None] = ContextVar("hookinbox_write_clock", default=None)


@contextmanager
def timing_writes() -> Iterator[WriteClock]:
    """A :class:`WriteClock` fed by the transactions this task runs inside the block."""
    clock = WriteClock()
    token = _WRITE_CLOCK.set(clock)
    try:
        yield clock
    finally:
        _WRITE_CLOCK.reset(token)


def count_write(held: float) -> None:
    """Called by a driver after a transaction that held the write lock ``held`` seconds."""
    clock = _WRITE_CLOCK.get()
    if clock is not None:
        clock.held += held
        clock.transactions += 1


class Driver(abc.ABC):
    url: str
    dialect: Dialect
    #: The package whose numbered migrations this driver applies (with the shared ones).
    migrations: str

    @abc.abstractmethod
    def decode_time(self, value: Any) -> datetime | None:
        """A time column as a UTC datetime (None stays None)."""

    # -- lifecycle --------------------------------------------------------------------
    @abc.abstractmethod
    async def open(self, *, create: bool = True, make_dirs: bool = False) -> None:
        """Connect; raise StoreUnavailable when the database cannot be had, and
        StoreNotFound when it does not exist and ``create`` is false (a SQLite file is
        then never made). A SQLite file's directory is made only with ``make_dirs``."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def has_schema(self) -> bool:
        """Whether the database holds hookinbox's schema (its migrations table), asked
        of the catalog so that an empty database is an answer, not an error."""

    @abc.abstractmethod
    async def migrate(self) -> list[str]:
        """Apply this dialect's pending numbered migrations; return the names applied."""

    @abc.abstractmethod
    async def ping(self) -> None:
        """Raise StoreUnavailable unless the database can commit now."""

    # -- running statements -----------------------------------------------------------
    @abc.abstractmethod
    async def run(self, tx: Tx[T], *, atomic: bool = True) -> T:
        """Drive ``tx`` to its answer. ``atomic``: inside one database transaction that
        commits when it returns and rolls back when it raises; else each statement
        commits on its own (on one connection, in order)."""

    async def run_held(self, tx: Tx[T]) -> T:
        """``run(tx, atomic=False)`` for the receive path's reservations, called for every
        batch: a driver with a pool keeps the connection between calls
        (:meth:`PostgresDriver.run_held <hookinbox.store.postgres.driver.PostgresDriver.
        run_held>`)."""
        return await self.run(tx, atomic=False)

    async def rows(self, sql: Sql, **params: Any) -> list[Row]:
        found: list[Row] = await self.run(one_step(Step(sql, params, "rows")), atomic=False)
        return found

    async def rows_planned_once(self, sql: Sql, **params: Any) -> list[Row]:
        """:meth:`rows` for a statement a worker runs on every loop turn, whose plan does
        not depend on its parameters' values: where the database would plan it again at
        every run (PostgreSQL), planned once per prepared statement instead."""
        return await self.rows(sql, **params)

    async def row(self, sql: Sql, **params: Any) -> Row | None:
        found: Row | None = await self.run(one_step(Step(sql, params, "row")), atomic=False)
        return found

    async def value(self, sql: Sql, **params: Any) -> Any:
        return await self.run(one_step(Step(sql, params, "value")), atomic=False)

    async def count(self, sql: Sql, **params: Any) -> int:
        changed: int = await self.run(one_step(Step(sql, params, "count")), atomic=False)
        return changed

    # -- waking workers ---------------------------------------------------------------
    @abc.abstractmethod
    async def wait_for_jobs(self, timeout: float) -> None:
        """Return when new jobs may be due (a wake-up after a commit) or after ``timeout``."""

    @abc.abstractmethod
    def rejects_row(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the database refusing a value (a character it cannot store,
        a key too long for its index), not the database failing: the row's fault."""

    def deadlocked(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the database breaking a deadlock by failing this statement
        (it may simply go again). SQLite's single writer never deadlocks."""
        return False

    def rejected(self, exc: BaseException) -> StoreRejectedRow | None:
        """The error a request gets for a value the database refused (named by the driver
        error's class only: its message may quote the value), or None."""
        if not self.rejects_row(exc):
            return None
        cause = exc.__cause__ if isinstance(exc, StoreError) and exc.__cause__ else exc
        return StoreRejectedRow(
            f"the store refused a value of this delivery: {type(cause).__name__}"
        )
