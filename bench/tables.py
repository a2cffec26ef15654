"""Read a target's queue from the bench process: plain SQL against its own tables.

hookinbox's tables are those of src/hookinbox/store/migrations/{sqlite,postgres}/*.sql:
``deliveries`` (the journal; ``first_seen_at``), ``jobs`` (``state``: accepted,
processing, completed, failed; ``completed_at``) and ``attempts`` (``number``,
``started_at``). SQLite keeps times as REAL unix seconds from its own clock, PostgreSQL
as timestamptz from ``now()``; both clocks are this machine's.

The peers are read through their own tables: procrastinate's ``procrastinate_jobs``
(``status``: todo, doing, succeeded, failed...) and pgqueuer's ``pgqueuer`` (queued and
picked jobs; a finished job leaves the table for ``pgqueuer_log``).
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import asyncpg
from harness import HookinboxStore, pg_dsn


@dataclass(frozen=True)
class QueueSql:
    """Counts over one kind of queue (no parameters)."""

    #: Rows that hold a job (receive mode's row check).
    rows: str
    #: Jobs not finished yet: waiting, scheduled for a retry, or running.
    unfinished: str
    #: Jobs finished successfully.
    done: str
    #: Jobs given up on (dead letters); None where the library deletes them.
    failed: str | None


HOOKINBOX_SQL = QueueSql(
    rows="SELECT count(*) FROM jobs",
    unfinished="SELECT count(*) FROM jobs WHERE state IN ('accepted', 'processing')",
    done="SELECT count(*) FROM jobs WHERE state = 'completed'",
    failed="SELECT count(*) FROM jobs WHERE state = 'failed'",
)
PROCRASTINATE_SQL = QueueSql(
    rows="SELECT count(*) FROM procrastinate_jobs",
    unfinished="SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')",
    done="SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'",
    failed="SELECT count(*) FROM procrastinate_jobs WHERE status = 'failed'",
)
PGQUEUER_SQL = QueueSql(
    rows="SELECT count(*) FROM pgqueuer",
    unfinished="SELECT count(*) FROM pgqueuer WHERE status IN ('queued', 'picked')",
    # Log rows may be folded into pgqueuer_statistics by the consumer: count both.
    done=(
        "SELECT (SELECT count(*) FROM pgqueuer_log WHERE status = 'successful')"
        " + (SELECT coalesce(sum(count), 0) FROM pgqueuer_statistics"
        " WHERE status = 'successful')"
    ),
    failed=None,
)


class Probe:
    """One read connection to a target's store: SQLite file or PostgreSQL database.

    Write queries with ``$1``-style placeholders; on SQLite they become ``?``.
    """

    def __init__(
        self, pg: asyncpg.Connection | None = None, sqlite: sqlite3.Connection | None = None
    ) -> None:
        self._pg = pg
        self._sqlite = sqlite

    @property
    def is_pg(self) -> bool:
        return self._pg is not None

    @classmethod
    async def open_pg(cls, db: str) -> Probe:
        return cls(pg=await asyncpg.connect(pg_dsn(db), timeout=10))

    @classmethod
    def open_sqlite(cls, path: Path) -> Probe:
        # Autocommit: every read sees what was committed by then (WAL readers never block
        # the writer).
        conn = sqlite3.connect(path, isolation_level=None, timeout=10)
        return cls(sqlite=conn)

    @classmethod
    async def open(cls, store: HookinboxStore) -> Probe:
        if store.kind == "sqlite":
            assert store.sqlite_path is not None
            return cls.open_sqlite(store.sqlite_path)
        assert store.pg_db is not None
        return await cls.open_pg(store.pg_db)

    async def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        if self._pg is not None:
            return [tuple(r) for r in await self._pg.fetch(sql, *args)]
        assert self._sqlite is not None
        for n in range(len(args), 0, -1):
            sql = sql.replace(f"${n}", "?")
        return list(self._sqlite.execute(sql, args).fetchall())

    async def scalar(self, sql: str, *args: Any) -> Any:
        rows = await self.rows(sql, *args)
        return rows[0][0] if rows else None

    async def backend_pids(self) -> list[int]:
        """The PostgreSQL backends of other clients connected to this database now."""
        if self._pg is None:
            return []
        rows = await self._pg.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        return [int(r[0]) for r in rows]

    async def runs_no_autovacuum(self) -> bool:
        """A PostgreSQL store whose server has autovacuum off."""
        return self._pg is not None and await self._pg.fetchval("SHOW autovacuum") != "on"

    async def stand_in_for_autovacuum(self, *, analyze: bool = False) -> bool:
        """``VACUUM`` the store when the server runs no autovacuum (this machine's has it
        off; every deployment has it on, and migration 011 makes it vacuum the queue after
        a few thousand dead rows). Without it, each run on a store works on the dead rows
        of every run before it: one worker fell from 1,732 to 674 jobs/s over four fills.
        True when it vacuumed."""
        if not await self.runs_no_autovacuum():
            return False
        # ``analyze``: its autoanalyze too (a fresh table's statistics, which the plans
        # of every statement read).
        await self._pg.execute("VACUUM ANALYZE" if analyze else "VACUUM")
        # Its dirty pages written now, not by the checkpointer in the middle of the run
        # (autovacuum spreads its writes; one VACUUM of the whole store does not).
        await self._pg.execute("CHECKPOINT")
        return True

    async def close(self) -> None:
        if self._pg is not None:
            await self._pg.close()
        if self._sqlite is not None:
            with contextlib.suppress(sqlite3.Error):
                self._sqlite.close()

    # ---------------------------------------------------------- hookinbox, both stores

    def _epoch(self, column: str) -> str:
        return f"extract(epoch FROM {column})::float8" if self.is_pg else column

    async def receipt_window(self, pattern: str) -> tuple[float, float, int]:
        """First and last ``first_seen_at`` (unix s) and count of deliveries whose event
        id is LIKE ``pattern`` (one run's ids)."""
        row = (
            await self.rows(
                f"SELECT {self._epoch('min(first_seen_at)')}, {self._epoch('max(first_seen_at)')},"
                " count(*) FROM deliveries WHERE event_id LIKE $1 ESCAPE '\\'",
                pattern,
            )
        )[0]
        return float(row[0] or 0.0), float(row[1] or 0.0), int(row[2])

    async def completed_between(self, t0: float, t1: float) -> int:
        """Jobs whose ``completed_at`` is in [t0, t1] (unix seconds)."""
        if self.is_pg:
            sql = (
                "SELECT count(*) FROM jobs WHERE completed_at >= to_timestamp($1)"
                " AND completed_at <= to_timestamp($2)"
            )
        else:
            sql = "SELECT count(*) FROM jobs WHERE completed_at >= $1 AND completed_at <= $2"
        return int(await self.scalar(sql, t0, t1))

    async def start_latencies(self, pattern: str) -> list[float]:
        """Seconds from ``deliveries.first_seen_at`` to the ``started_at`` of its job's
        first attempt, for each delivery LIKE ``pattern`` whose job has started."""
        diff = self._epoch("a.started_at - d.first_seen_at")
        rows = await self.rows(
            f"SELECT {diff} FROM deliveries d"
            " JOIN jobs j ON j.delivery_id = d.id"
            " JOIN attempts a ON a.job_id = j.id AND a.number = 1"
            " WHERE d.event_id LIKE $1 ESCAPE '\\'",
            pattern,
        )
        return [float(r[0]) for r in rows]


class QueueReader(Protocol):
    """What the drain reads of a target's queue, whatever keeps it."""

    async def unfinished(self) -> int: ...

    async def done(self) -> int: ...

    async def failed(self) -> int | None: ...

    async def close(self) -> None: ...


class SqlQueueReader:
    """A queue kept in a database, read through its counts (:class:`QueueSql`)."""

    def __init__(self, probe: Probe, sql: QueueSql) -> None:
        self.probe = probe
        self._sql = sql

    async def unfinished(self) -> int:
        return int(await self.probe.scalar(self._sql.unfinished))

    async def done(self) -> int:
        return int(await self.probe.scalar(self._sql.done))

    async def failed(self) -> int | None:
        if self._sql.failed is None:
            return None
        return int(await self.probe.scalar(self._sql.failed))

    async def close(self) -> None:
        await self.probe.close()
