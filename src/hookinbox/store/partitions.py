"""PostgreSQL's payload partitions: one per UTC day of delivery ids, made ahead, retired
whole by dropping them (SQLite has none: its purge deletes rows).

Delivery ids begin with their millisecond in hex, so a day is a range of ids and the
payloads' primary key (the delivery id) stays one global key. ``hookinbox migrate`` and
every purge make the days ahead (:data:`DAYS_AHEAD`); a delivery whose day has no
partition still lands, in the DEFAULT partition, which otherwise holds only the payloads
kept past their day. A day retires once every id in it was made more than the payload
retention ago: its payloads still needed (a job unfinished, failed, or completed within
the retention) move to DEFAULT and the rest go with the partition, in one short
transaction whose locks wait at most :data:`LOCK_WAIT` (else it is tried next turn). The
journal needs no mark: a payload is "retained" while its row exists. The functions the
statements call are migration 019's; docs/store.md, "Partitions", shows how to look.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from hookinbox.store.dialect import POSTGRES
from hookinbox.store.statements import load_postgres_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_postgres_statements("partitions")
_HAS_PARTITIONS = _SQL["has_partitions"]
_CREATE_AHEAD = _SQL["create_ahead"]
_LISTING = _SQL["listing"]
_RETIRABLE = _SQL["retirable"]
_HELD = _SQL["held"]
_COUNT_ROWS = _SQL["count_rows"]
_RETIRE = _SQL["retire"]

#: Days made ahead of today (UTC), so a missing partition is never the receiver's problem.
DAYS_AHEAD = 3
#: The longest a retiring transaction waits for a lock: while it waits, the writers behind
#: it wait too (a DETACH queues behind a long search of payloads).
LOCK_WAIT = "300ms"
#: A day whose held payloads are more than this stays (tried again next turn): they are
#: copied inside the retiring transaction, which must stay short. A backlog that large
#: is a worker problem; the delete path is not the answer to it either.
MAX_HELD = 20_000


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    name: str
    #: The smallest delivery id it holds (None: from the beginning) and the first it
    #: does not (None for DEFAULT).
    lo: str | None
    hi: str | None
    #: The planner's estimate of its rows (-1: not analyzed yet).
    estimate: int

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "lo": self.lo, "hi": self.hi, "estimate": self.estimate}


@dataclass(frozen=True, slots=True)
class Retirement:
    """One day partition at the cutoff: dropped, or why not this turn."""

    name: str
    #: Payloads it held (gone with it, but for ``held``), or would hold (dry run).
    rows: int
    #: Payloads kept: moved to the DEFAULT partition.
    held: int
    retired: bool
    #: Why it stays this turn: "lock" (a lock not had in time), "held" (too many held
    #: payloads), "dry_run"; None when retired.
    deferred: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rows": self.rows,
            "held": self.held,
            "retired": self.retired,
            "deferred": self.deferred,
        }


class Partitions:
    def __init__(self, db: Driver) -> None:
        self._db = db
        #: Whether this store partitions payloads (PostgreSQL); the methods of a store
        #: that does not answer "nothing".
        self.enabled = db.dialect is POSTGRES

    async def create_ahead(self, days: int = DAYS_AHEAD, *, today: date | None = None) -> int:
        """Make the day partitions missing from ``today`` (UTC) to ``days`` after it; how
        many were made (0 when all were there: one catalog query)."""
        if not self.enabled or not await self._db.value(_HAS_PARTITIONS):
            return 0
        first = today or datetime.now(UTC).date()
        made = await self._db.value(_CREATE_AHEAD, first=first, last=first + timedelta(days))
        return int(made or 0)

    async def listing(self) -> list[PartitionInfo]:
        if not self.enabled:
            return []
        found = await self._db.rows(_LISTING)
        return [PartitionInfo(r["name"], r["lo"], r["hi"], int(r["estimate"])) for r in found]

    async def retire(
        self,
        older_than_seconds: float,
        *,
        dry_run: bool = False,
        lock_wait: str = LOCK_WAIT,
        max_held: int = MAX_HELD,
    ) -> list[Retirement]:
        """Retire every day partition whose ids were all made more than
        ``older_than_seconds`` ago (the payload retention), oldest first."""
        if not self.enabled:
            return []
        age = float(older_than_seconds)
        done: list[Retirement] = []
        for part in await self._db.rows(_RETIRABLE, age=age):
            held = [
                r["id"] for r in await self._db.rows(_HELD, lo=part["lo"], hi=part["hi"], age=age)
            ]
            if dry_run or len(held) > max_held:
                why = "dry_run" if dry_run else "held"
                done.append(Retirement(part["name"], -1, len(held), False, why))
                continue
            found = int(await self._db.value(_COUNT_ROWS, part=part["name"]))
            result = await self._db.row(_RETIRE, part=part["name"], held=held, wait=lock_wait)
            assert result is not None
            if result["moved"] is None:
                done.append(Retirement(part["name"], found, len(held), False, "lock"))
            else:
                done.append(Retirement(part["name"], found, int(result["moved"]), True))
        return done
