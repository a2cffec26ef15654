"""What hookinbox stored, read with plain SQL from its own tables (deliveries, jobs).

Only the columns of the numbered migrations are used (store/migrations/*/001_init.sql).
Reads are retried for a short while: the server may still be coming back from a fault.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import asyncpg

JOURNAL_SQL = """
SELECT d.event_id, d.id, d.delivery_count, j.id, j.state, j.attempts, j.last_error
FROM deliveries d LEFT JOIN jobs j ON j.delivery_id = d.id
WHERE d.source = {p}
"""
QUEUE_SQL = "SELECT state, count(*) FROM jobs WHERE source = {p} GROUP BY state"
# Attempts per worker process (hookinbox names a worker "host:pid") and per outcome; times
# as seconds since the epoch ({epoch} is the store's way to write one).
ATTEMPTS_BY_WORKER_SQL = """
SELECT a.worker, count(*), {epoch_min}, {epoch_max}
FROM attempts a JOIN jobs j ON j.id = a.job_id
WHERE j.source = {p} GROUP BY a.worker
"""
ATTEMPTS_BY_OUTCOME_SQL = """
SELECT coalesce(a.outcome, 'open'), coalesce(a.error_code, ''), count(*)
FROM attempts a JOIN jobs j ON j.id = a.job_id
WHERE j.source = {p} GROUP BY 1, 2
"""
ACTIVE_STATES = ("accepted", "processing")


@dataclass(frozen=True)
class JobRow:
    event_id: str
    delivery_id: str
    delivery_count: int
    job_id: str | None
    state: str | None
    attempts: int | None
    last_error: str | None


@dataclass(frozen=True)
class WorkerAttempts:
    """Job attempts one worker process made (``pid`` from hookinbox's ``host:pid`` name)."""

    worker: str
    count: int
    first: float
    last: float

    @property
    def pid(self) -> int | None:
        tail = self.worker.rsplit(":", 1)[-1]
        return int(tail) if tail.isdigit() else None


@dataclass(frozen=True)
class Journal:
    rows: tuple[JobRow, ...]
    by_worker: tuple[WorkerAttempts, ...] = ()
    by_outcome: tuple[tuple[str, int], ...] = ()

    @property
    def event_ids(self) -> set[str]:
        return {row.event_id for row in self.rows}

    def jobs(self) -> list[JobRow]:
        return [row for row in self.rows if row.job_id is not None]

    def states(self) -> Counter[str]:
        return Counter(row.state or "no job" for row in self.rows)


class StoreReader(Protocol):
    def epoch(self, column: str) -> str: ...

    async def fetch(self, sql: str, source: str) -> list[tuple[Any, ...]]: ...


@dataclass(frozen=True)
class PostgresReader:
    url: str

    def epoch(self, column: str) -> str:
        return f"extract(epoch from {column})::float8"

    async def fetch(self, sql: str, source: str) -> list[tuple[Any, ...]]:
        connection = await asyncpg.connect(self.url, timeout=5)
        try:
            records = await connection.fetch(sql.format(p="$1"), source, timeout=30)
        finally:
            await connection.close()
        return [tuple(record) for record in records]


@dataclass(frozen=True)
class SqliteReader:
    path: Path

    def epoch(self, column: str) -> str:
        return column  # stored as REAL seconds since the epoch

    async def fetch(self, sql: str, source: str) -> list[tuple[Any, ...]]:
        return await asyncio.to_thread(self._fetch, sql.format(p="?"), source)

    def _fetch(self, sql: str, source: str) -> list[tuple[Any, ...]]:
        connection = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10)
        try:
            return list(connection.execute(sql, (source,)).fetchall())
        finally:
            connection.close()


async def _fetch_retrying(reader: StoreReader, sql: str, source: str) -> list[tuple[Any, ...]]:
    deadline = time.monotonic() + 20
    sql = sql.replace("{epoch_min}", f"min({reader.epoch('a.started_at')})")
    sql = sql.replace("{epoch_max}", f"max({reader.epoch('a.started_at')})")
    while True:
        try:
            return await reader.fetch(sql, source)
        except (OSError, asyncpg.PostgresError, sqlite3.Error, TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def queue_counts(reader: StoreReader, source: str) -> Counter[str]:
    rows = await _fetch_retrying(reader, QUEUE_SQL, source)
    return Counter({str(state): int(count) for state, count in rows})


async def wait_for_drain(
    reader: StoreReader, source: str, bound: float
) -> tuple[bool, float, Counter[str]]:
    """Poll until no job is waiting or leased; (drained, seconds, last counts)."""
    started = time.monotonic()
    while True:
        counts = await queue_counts(reader, source)
        active = sum(counts[state] for state in ACTIVE_STATES)
        elapsed = time.monotonic() - started
        if active == 0 or elapsed > bound:
            return active == 0, elapsed, counts
        await asyncio.sleep(0.5)


async def read_journal(reader: StoreReader, source: str) -> Journal:
    rows = await _fetch_retrying(reader, JOURNAL_SQL, source)
    workers = await _fetch_retrying(reader, ATTEMPTS_BY_WORKER_SQL, source)
    outcomes = await _fetch_retrying(reader, ATTEMPTS_BY_OUTCOME_SQL, source)
    return Journal(
        tuple(
            JobRow(
                event_id=str(event_id),
                delivery_id=str(delivery_id),
                delivery_count=int(count),
                job_id=None if job_id is None else str(job_id),
                state=None if state is None else str(state),
                attempts=None if attempts is None else int(attempts),
                last_error=None if last_error is None else str(last_error),
            )
            for event_id, delivery_id, count, job_id, state, attempts, last_error in rows
        ),
        tuple(
            WorkerAttempts(str(worker), int(count), float(first), float(last))
            for worker, count, first, last in workers
        ),
        tuple(
            sorted(
                ((f"{outcome} {code}".strip(), int(count)) for outcome, code, count in outcomes),
                key=lambda pair: -pair[1],
            )
        ),
    )
