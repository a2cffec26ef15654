"""Retention: drop payloads soon after processing, journal keys after the key retention.

On PostgreSQL, payloads, attempts and jobs are partitioned by day
(:mod:`hookinbox.store.partitions`): each purge first makes the partitions of the days
ahead that are missing and retires, whole, the days of payloads past the payload
retention and, but for ``payloads_only``, the days of attempts and jobs past the key
retention (one short transaction each). Then three steps, each in bounded batches (one short
transaction per batch):

1. payloads of deliveries whose jobs all completed more than ``payload_retention`` ago
   (on PostgreSQL only those held past their day, in the DEFAULT partition);
2. journal rows (with their jobs, attempts and ledger rows) last seen more than
   ``key_retention`` ago whose jobs all completed;
3. rejected deliveries (refusals kept for a retry) last seen more than
   ``[rejected] retention`` ago.

A key retention shorter than the longest redelivery window is refused: a provider's late
retry would look like a new event and run its effects again. Dead letters and unfinished
deliveries are never purged (the report counts them as held). ``serve`` runs the same
purge in the background every ``purge_interval``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from hookinbox.codes import error_code_of
from hookinbox.config import Config, store_kind
from hookinbox.errors import InvalidArgument, OperationRefused
from hookinbox.logs import get_logger
from hookinbox.store import Retirement, Store, timing_writes

log = get_logger("hookinbox.ops.purge")

T = TypeVar("T")

PurgeKind = Literal["payloads", "deliveries", "rejected"]
#: ``progress(kind, done, total)`` after every batch.
Progress = Callable[[PurgeKind, int, int], None]

#: SQLite's busy handler retries a waiting writer every 100 ms at worst: a shorter pause
#: between batches can pass unseen by a receiver waiting for the lock.
SQLITE_MIN_PAUSE = 0.1
#: SQLite: how long one batch should hold the write lock. The batch size follows it
#: (from :data:`SQLITE_FIRST_BATCH`, between :data:`SQLITE_MIN_BATCH` and the configured
#: batch), so a receiver that finds the lock taken waits about this long, on a small
#: store or a large one, on a fast disk or a slow one.
SQLITE_BATCH_HOLD = 0.02
SQLITE_FIRST_BATCH = 100
SQLITE_MIN_BATCH = 10


class BatchPacer:
    """Sizes purge batches and pauses between two of them.

    SQLite has one writer: a purge whose batches follow each other back to back keeps
    taking the lock from the receivers waiting on it (a purge of 1 million payloads held
    a receiver at a fifth of its rate, bench growth mode). On SQLite a batch aims at
    holding the lock :data:`SQLITE_BATCH_HOLD` and the pause after it keeps the purge's
    share of the wall time holding the lock at ``[operations] purge_write_share`` (the
    time the lock was held, from the driver, not the batch's wall time, which also counts
    the waits for a receiver's commit). On PostgreSQL (no single writer) the batch is
    the configured one and the pause ``purge_pause`` times the batch's wall time."""

    def __init__(self, config: Config, largest: int) -> None:
        ops = config.operations
        self._sqlite = store_kind(config.database) == "sqlite"
        self._largest = largest
        if self._sqlite:
            self._ratio = (1.0 - ops.purge_write_share) / ops.purge_write_share
            self._floor = SQLITE_MIN_PAUSE if self._ratio > 0 else 0.0
            self._size = min(largest, SQLITE_FIRST_BATCH)
        else:
            self._ratio = ops.purge_pause
            self._floor = 0.0
            self._size = largest
        self._pause = 0.0

    @property
    def size(self) -> int:
        """The rows the next batch may take."""
        return self._size

    async def run(self, rows: int, batch: Callable[[int], Awaitable[T]]) -> T:
        """``batch(rows)``, after the pause the previous batch calls for."""
        if self._pause > 0:
            await asyncio.sleep(self._pause)
        started = time.monotonic()
        with timing_writes() as clock:
            result = await batch(rows)
        held = clock.held if self._sqlite and clock.transactions else time.monotonic() - started
        self._pause = max(held * self._ratio, self._floor) if self._ratio > 0 else 0.0
        if self._sqlite and rows == self._size and held > 0:
            # Halve or double at most per batch: one slow commit (a checkpoint, a
            # neighbour's fsync) does not shrink the batch to nothing.
            aimed = self._size * SQLITE_BATCH_HOLD / held
            aimed = min(max(aimed, self._size / 2), self._size * 2)
            self._size = int(min(max(aimed, SQLITE_MIN_BATCH), self._largest))
        return result


@dataclass(frozen=True, slots=True)
class PurgedKind:
    kind: PurgeKind
    older_than_seconds: float
    candidates: int
    deleted: int
    batches: int
    #: Old enough, but kept because a job is unfinished or dead-lettered (deliveries only).
    held: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "older_than_seconds": self.older_than_seconds,
            "candidates": self.candidates,
            "deleted": self.deleted,
            "batches": self.batches,
            "held": self.held,
        }


@dataclass(frozen=True, slots=True)
class PurgeResult:
    dry_run: bool
    steps: list[PurgedKind]
    #: PostgreSQL's day partitions of payloads past the payload retention and of attempts
    #: and jobs past the key retention: retired, or why not this time (empty on SQLite).
    partitions: list[Retirement] = field(default_factory=list)
    #: Day partitions made ahead by this purge.
    partitions_made: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "steps": [step.as_json() for step in self.steps],
            "partitions": [each.as_json() for each in self.partitions],
            "partitions_made": self.partitions_made,
        }


async def purge(
    store: Store,
    config: Config,
    *,
    older_than: float | None = None,
    payloads_only: bool = False,
    batch: int | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
    max_rows: int | None = None,
    actor: str | None = None,
) -> PurgeResult:
    """Purge in batches. ``older_than`` (seconds) sets the key retention, or with
    ``payloads_only`` the payload retention; the config gives the defaults.
    ``max_rows``: at most that many rows of each kind go in this call (the API's bound:
    one request is a bounded amount of work); a step's ``candidates - deleted`` is
    what is left for the next call. ``actor``: a purge that deleted something is
    recorded in the operators' audit under that name (the background purge has none)."""
    report = await _purge(
        store, config, older_than, payloads_only, batch, dry_run, progress, max_rows
    )
    deleted = [f"{step.kind}:{step.deleted}" for step in report.steps if step.deleted]
    deleted += [f"partition:{each.name}" for each in report.partitions if each.retired]
    if actor is not None and deleted:
        await store.audit.record_operator_action(
            actor=actor, command="purge", detail=" ".join(deleted)
        )
    return report


async def _purge(
    store: Store,
    config: Config,
    older_than: float | None,
    payloads_only: bool,
    batch: int | None,
    dry_run: bool,
    progress: Progress | None,
    max_rows: int | None,
) -> PurgeResult:
    ops = config.operations
    size = batch if batch is not None else ops.purge_batch
    if size < 1:
        raise InvalidArgument("--batch must be at least 1")
    if max_rows is not None and max_rows < 1:
        raise InvalidArgument("max_rows must be at least 1")
    bound = _Bound(size, max_rows)
    steps: list[PurgedKind] = []
    pacer = BatchPacer(config, size)
    if payloads_only:
        age = ops.payload_retention if older_than is None else older_than
        made, retired = await _partitions(store, age, dry_run)
        steps.append(await _purge_step(_payloads(store), age, bound, dry_run, progress, pacer))
        return PurgeResult(dry_run, steps, retired, made)
    key_age = ops.key_retention if older_than is None else older_than
    window = config.longest_redelivery_window()
    if key_age < window:
        raise OperationRefused(
            f"key retention {_human(key_age)} is shorter than the redelivery window "
            f"{_human(window)}: a late provider retry would look new"
        )
    made, retired = await _partitions(store, ops.payload_retention, dry_run)
    # The attempts and jobs of the days whose journal rows go now leave by DROP before the
    # journal batches run, so that their cascade finds none of them to delete.
    retired += await store.partitions.retire(key_age, table="attempts", dry_run=dry_run)
    retired += await store.partitions.retire(key_age, table="jobs", dry_run=dry_run)
    for step, step_age in (
        (_payloads(store), ops.payload_retention),
        (_deliveries(store), key_age),
        (_rejected(store), config.rejected.retention),
    ):
        steps.append(await _purge_step(step, step_age, bound, dry_run, progress, pacer))
    return PurgeResult(dry_run, steps, retired, made)


async def _partitions(store: Store, age: float, dry_run: bool) -> tuple[int, list[Retirement]]:
    """PostgreSQL's day partitions: the missing ones ahead made, those past ``age``
    retired (nothing on SQLite)."""
    made = 0 if dry_run else await store.partitions.create_ahead()
    return made, await store.partitions.retire(age, dry_run=dry_run)


@dataclass(frozen=True, slots=True)
class _Bound:
    """The batch size, and the most rows one step may delete (None: all it finds)."""

    size: int
    max_rows: int | None


@dataclass(frozen=True, slots=True)
class _Step:
    """One kind of purge: how the store counts it (candidates, held) and deletes a batch
    of it. ``progress``: whether the caller's progress callback hears of its batches."""

    kind: PurgeKind
    count: Callable[[float], Awaitable[tuple[int, int]]]
    delete: Callable[[float, int], Awaitable[int]]
    progress: bool = True


def _payloads(store: Store) -> _Step:
    async def count(age: float) -> tuple[int, int]:
        return await store.retention.count_purgeable_payloads(age), 0

    return _Step("payloads", count, store.retention.purge_payloads)


def _deliveries(store: Store) -> _Step:
    return _Step(
        "deliveries",
        store.retention.count_purgeable_deliveries,
        store.retention.purge_deliveries,
    )


def _rejected(store: Store) -> _Step:
    async def count(age: float) -> tuple[int, int]:
        return await store.rejected.count_purgeable_rejected(age), 0

    return _Step("rejected", count, store.rejected.purge_rejected, progress=False)


async def _purge_step(
    step: _Step,
    age: float,
    bound: _Bound,
    dry_run: bool,
    progress: Progress | None,
    pacer: BatchPacer,
) -> PurgedKind:
    total, held = await step.count(age)
    if dry_run or not total:
        return PurgedKind(step.kind, age, total, 0, 0, held)
    deleted, batches = await _in_batches(
        step.kind,
        lambda rows: step.delete(age, rows),
        total,
        bound,
        progress if step.progress else None,
        pacer,
    )
    return PurgedKind(step.kind, age, total, deleted, batches, held)


async def _in_batches(
    kind: PurgeKind,
    batch: Callable[[int], Awaitable[int]],
    total: int,
    bound: _Bound,
    progress: Progress | None,
    pacer: BatchPacer,
) -> tuple[int, int]:
    """``batch(rows)`` (rows: the pacer's size) until it deletes nothing or the bound is
    reached; the rows deleted and the batches run."""
    deleted = batches = 0
    most = bound.max_rows
    if progress:
        progress(kind, 0, total)
    # Bounded: never more rows than the count asked for, plus a batch's worth of slack
    # for new arrivals (each batch that goes on deletes at least one row).
    while deleted < total + bound.size:
        room = pacer.size if most is None else min(pacer.size, most - deleted)
        if room <= 0:
            break
        count = await pacer.run(room, batch)
        if not count:
            break
        deleted += count
        batches += 1
        if progress:
            progress(kind, deleted, max(total, deleted))
    return deleted, batches


async def run_purge_loop(store: Store, config: Config, stop: asyncio.Event) -> None:
    """The background purge of ``serve``: every ``purge_interval`` (0 = never), with the
    configured retentions. A failing store is logged and tried again next time."""
    interval = config.operations.purge_interval
    if interval <= 0:
        return
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), interval)
            return
        except TimeoutError:
            pass
        try:
            report = await purge(store, config)
        except Exception as exc:  # the background purge outlives a bad moment of the store
            log.error("purge_failed", error=error_code_of(exc))
            continue
        for step in report.steps:
            if step.deleted or step.held:
                log.info("purged", kind=step.kind, deleted=step.deleted, held=step.held)
        for each in report.partitions:
            log.info(
                "partition_retired" if each.retired else "partition_deferred", **each.as_json()
            )


def _human(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
