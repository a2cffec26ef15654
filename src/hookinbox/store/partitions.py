"""PostgreSQL's payload, attempt and job partitions: one per UTC day of delivery ids,
made ahead, retired whole by dropping them (SQLite has none: its purge deletes rows).

Delivery ids begin with their millisecond in hex, so a day is a range of ids and the
payloads' primary key (the delivery id) stays one global key. ``hookinbox migrate`` and
every purge make the days ahead (:data:`DAYS_AHEAD`); a delivery whose day has no
partition still lands, in the DEFAULT partition, which otherwise holds only the payloads
kept past their day. A day retires once every id in it was made more than the payload
retention ago: its payloads still needed (a job unfinished, failed, or completed within
the retention) move to DEFAULT and the rest go with the partition, in one short
transaction whose locks wait at most :data:`LOCK_WAIT` (else it is tried next turn). The
journal needs no mark: a payload is "retained" while its row exists. Attempts and jobs
retire by day at the key retention, the unfinished and dead-lettered jobs (and their
attempts) kept in DEFAULT; the ledger rows of a retired day's jobs go after it, in
batches. The functions the statements call are migrations 019's, 027's and 028's;
docs/store.md, "Partitions", shows how to look.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sized
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from hookinbox.store.dialect import POSTGRES
from hookinbox.store.statements import load_postgres_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_postgres_statements("partitions")
_HAS_PARTITIONS = _SQL["has_partitions"]
_HAS_ATTEMPT_PARTITIONS = _SQL["has_attempt_partitions"]
_HAS_JOB_PARTITIONS = _SQL["has_job_partitions"]
_CREATE_AHEAD = _SQL["create_ahead"]
_CREATE_ATTEMPTS_AHEAD = _SQL["create_attempts_ahead"]
_CREATE_JOBS_AHEAD = _SQL["create_jobs_ahead"]
_LISTING = _SQL["listing"]
_RETIRABLE = _SQL["retirable"]
_HELD = _SQL["held"]
_HELD_JOBS = _SQL["held_jobs"]
_COUNT_ROWS = _SQL["count_rows"]
_RETIRE = _SQL["retire"]
_RETIRE_ATTEMPTS = _SQL["retire_attempts"]
_RETIRE_JOBS = _SQL["retire_jobs"]
_DROP_RETIRED_ROWS = (
    _SQL["drop_retired_effects"],
    _SQL["drop_retired_superseded"],
    _SQL["drop_retired_parked"],
)

PartitionedTable = Literal["payloads", "attempts", "jobs"]
#: The partitioned tables, in the order they are listed.
PARTITIONED: tuple[PartitionedTable, ...] = ("payloads", "attempts", "jobs")
#: The ledger (and parked) rows of a retired day's jobs deleted per statement.
LEDGER_BATCH = 5_000

#: Days made ahead of today (UTC), so a missing partition is never the receiver's problem.
DAYS_AHEAD = 3
#: The longest a retiring transaction waits for a lock: while it waits, the writers behind
#: it wait too (a DETACH queues behind a long search of payloads).
LOCK_WAIT = "300ms"
#: A day whose held payloads (or jobs whose attempts are held) are more than this stays
#: (tried again next turn): they are copied inside the retiring transaction, which must
#: stay short. A backlog that large is a worker problem; the delete path is not the
#: answer to it either.
MAX_HELD = 20_000


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    #: The partitioned table it belongs to.
    table: PartitionedTable
    name: str
    #: The smallest delivery id it holds (None: from the beginning) and the first it
    #: does not (None for DEFAULT).
    lo: str | None
    hi: str | None
    #: The planner's estimate of its rows (-1: not analyzed yet).
    estimate: int

    def as_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "name": self.name,
            "lo": self.lo,
            "hi": self.hi,
            "estimate": self.estimate,
        }


@dataclass(frozen=True, slots=True)
class Retirement:
    """One day partition at the cutoff: dropped, or why not this turn."""

    name: str
    #: Rows it held (gone with it, but for ``held``), or -1 (not counted: a dry run or
    #: deferred).
    rows: int
    #: Rows kept: moved to the DEFAULT partition (deferred or a dry run: the payloads, or
    #: for attempts the jobs, that would be kept).
    held: int
    retired: bool
    #: Why it stays this turn: "lock" (a lock not had in time), "held" (too many rows to
    #: keep), "dry_run"; None when retired.
    deferred: str | None = None

    #: The partitioned table.
    table: PartitionedTable = "payloads"
    #: Wall seconds of its retiring transaction (0.0: not tried).
    seconds: float = 0.0
    #: Of those, the seconds from its DETACH's lock request to its DROP, measured in the
    #: database: the table's writers queue behind that lock (and then its commit), so this
    #: is what the receivers wait, where ``seconds`` also holds the round trip, the wait
    #: for another retirement of the table and the commit.
    locked_seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "name": self.name,
            "rows": self.rows,
            "held": self.held,
            "retired": self.retired,
            "deferred": self.deferred,
            "seconds": round(self.seconds, 4),
            "locked_seconds": round(self.locked_seconds, 4),
        }


class Partitions:
    def __init__(self, db: Driver) -> None:
        self._db = db
        #: Whether this store partitions payloads, attempts and jobs (PostgreSQL); the methods
        #: of a store that does not answer "nothing".
        self.enabled = db.dialect is POSTGRES

    async def create_ahead(self, days: int = DAYS_AHEAD, *, today: date | None = None) -> int:
        """Make the day partitions missing from ``today`` (UTC) to ``days`` after it; how
        many were made (0 when all were there: one catalog query)."""
        if not self.enabled or not await self._db.value(_HAS_PARTITIONS):
            return 0
        first = today or datetime.now(UTC).date()
        last = first + timedelta(days)
        made = int(await self._db.value(_CREATE_AHEAD, first=first, last=last) or 0)
        for has, create in (
            (_HAS_ATTEMPT_PARTITIONS, _CREATE_ATTEMPTS_AHEAD),
            (_HAS_JOB_PARTITIONS, _CREATE_JOBS_AHEAD),
        ):
            if await self._db.value(has):
                made += int(await self._db.value(create, first=first, last=last) or 0)
        return made

    async def listing(self) -> list[PartitionInfo]:
        if not self.enabled:
            return []
        return [
            PartitionInfo(table, r["name"], r["lo"], r["hi"], int(r["estimate"]))
            for table in PARTITIONED
            for r in await self._db.rows(_LISTING, parent=table)
        ]

    async def retire(
        self,
        older_than_seconds: float,
        *,
        table: PartitionedTable = "payloads",
        dry_run: bool = False,
        lock_wait: str = LOCK_WAIT,
        max_held: int = MAX_HELD,
    ) -> list[Retirement]:
        """Retire every day partition of ``table`` whose ids were all made more than
        ``older_than_seconds`` ago (for payloads the payload retention, for attempts and
        jobs the key retention), oldest first. A day of jobs retired, the ledger rows of
        its jobs go after it."""
        if not self.enabled:
            return []
        age = float(older_than_seconds)

        async def held_payloads(lo: str, hi: str) -> list[str]:
            return [r["id"] for r in await self._db.rows(_HELD, lo=lo, hi=hi, age=age)]

        async def retire_payloads(name: str, held: list[str]) -> Any:
            return await self._db.row(_RETIRE, part=name, held=held, wait=lock_wait)

        async def held_jobs(lo: str, hi: str) -> int:
            return int(await self._db.value(_HELD_JOBS, lo=lo, hi=hi))

        async def retire_attempts(name: str, _held: int) -> Any:
            return await self._db.row(_RETIRE_ATTEMPTS, part=name, wait=lock_wait)

        async def retire_jobs(name: str, _held: int) -> Any:
            return await self._db.row(_RETIRE_JOBS, part=name, wait=lock_wait)

        if table == "payloads":
            return await self._retire_each(
                table, age, dry_run, max_held, held_payloads, retire_payloads
            )
        if table == "attempts":
            if not await self._db.value(_HAS_ATTEMPT_PARTITIONS):
                return []
            return await self._retire_each(
                table, age, dry_run, max_held, held_jobs, retire_attempts
            )
        if not await self._db.value(_HAS_JOB_PARTITIONS):
            return []
        return await self._retire_each(table, age, dry_run, max_held, held_jobs, retire_jobs)

    async def drop_retired_rows(self, lo: str, hi: str) -> int:
        """The rows naming a job of ids ``lo`` to ``hi`` that is gone (effects, superseded
        effects, a parked row), in batches of :data:`LEDGER_BATCH`; how many went."""
        gone = 0
        for statement in _DROP_RETIRED_ROWS:
            while True:
                batch = await self._db.count(statement, lo=lo, hi=hi, limit=LEDGER_BATCH)
                gone += batch
                if batch < LEDGER_BATCH:
                    break
        return gone

    async def _retire_each(
        self,
        table: PartitionedTable,
        age: float,
        dry_run: bool,
        max_held: int,
        held_of: Callable[[str, str], Awaitable[Sized | int]],
        retire_one: Callable[[str, Any], Awaitable[Any]],
    ) -> list[Retirement]:
        """The partitions of ``table`` past ``age``, oldest first: each one's held rows
        read (``held_of``: the payloads' ids, or the count of the jobs whose attempts stay)
        under no lock, then retired (``retire_one``) unless they are too many."""
        done: list[Retirement] = []
        for part in await self._db.rows(_RETIRABLE, parent=table, age=age):
            name = part["name"]
            held = await held_of(part["lo"], part["hi"])
            kept = held if isinstance(held, int) else len(held)
            if dry_run or kept > max_held:
                why = "dry_run" if dry_run else "held"
                done.append(Retirement(name, -1, kept, False, why, table))
                continue
            found = int(await self._db.value(_COUNT_ROWS, part=name))
            started = time.monotonic()
            result = await retire_one(name, held)
            took = time.monotonic() - started
            assert result is not None
            if result["moved"] is None:
                done.append(Retirement(name, found, kept, False, "lock", table, took))
                continue
            moved = int(result["moved"])
            locked = float(result["locked_ms"] or 0.0) / 1000
            done.append(Retirement(name, found, moved, True, None, table, took, locked))
            if table == "jobs":
                await self.drop_retired_rows(part["lo"], part["hi"])
        return done
