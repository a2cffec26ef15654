"""PostgreSQL's hot path: reserve, claim and settle, each ONE statement (one round trip).

The statements are ``postgres/hot_path.sql``; here is what they take and answer. A batch
travels as JSON parameters encoded by orjson in one C call (cheaper for the receiver
than the driver encoding an array per column); a value JSON cannot carry (a lone
surrogate) is the row's fault, like a value PostgreSQL refuses, so the journal answers
that row alone.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import orjson

from hookinbox.errors import StoreError
from hookinbox.store.hot_path import (
    LEASE_EXPIRED,
    HotPath,
    jobs_params,
    new_lease_token,
    order_horizon,
)
from hookinbox.store.records import ClaimedJob, NewDelivery, Reservation
from hookinbox.store.sql import Sql, Step, one_step, pinned
from hookinbox.store.statements import load_postgres_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_postgres_statements("hot_path")
_RESERVE = _SQL["reserve"]
_CLAIM = _SQL["claim"]
_SETTLE = _SQL["settle"]
_SETTLE_AND_CLAIM = _SQL["settle_and_claim"]
_FAIL_EXHAUSTED = _SQL["fail_exhausted"]
_HAS_JOB_FLOOR = _SQL["has_job_floor"]
_JOB_FLOOR = _SQL["job_floor"]

#: How often a worker asks again for the first day holding due jobs: a job made due
#: again in an older day (a replay of a dead letter) waits at most this long.
FLOOR_REFRESH = 2.0
#: The claim and settle statements kept written for this many floors (a floor moves at
#: most a few times a day).
_PINNED_KEPT = 4
_DAY_MS = 86_400_000

#: A reservation that takes longer is answered 503: providers wait 10-30 s for an answer,
#: and a retry later beats a timeout now.
RESERVE_TIMEOUT = 5.0
#: How many times a batch goes round for the items a concurrent receiver's commit hid.
_RESERVE_ROUNDS = 5

#: The values of a settlement (:func:`~hookinbox.store.hot_path.settle_params`) in the
#: order a row of the settle batch holds them: ``(e->>0)`` ... ``(e->>11)`` in
#: ``postgres/hot_path.sql`` (JSON arrays: no key per value to encode, no dict per row).
SETTLE_FIELDS = (
    "id",
    "token",
    "state",
    "outcome",
    "error",
    "business_id",
    "delay",
    "refund",
    "target",
    "http_status",
    "snippet",
    "duration_ms",
)
_SETTLE_ROW = itemgetter(*SETTLE_FIELDS)


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError as exc:  # a value JSON cannot carry (a lone surrogate)
        raise StoreError(f"PostgreSQL cannot store a value: {type(exc).__name__}") from exc


def _settle_batch(batch: Sequence[Mapping[str, Any]]) -> str:
    return _json(list(map(_SETTLE_ROW, batch)))


def day_floor(job_id: str) -> str:
    """The first id of the UTC day a job (or delivery) id was made in; '' for an id not
    made by :func:`hookinbox.ids.new_delivery_id` (nothing pruned)."""
    try:
        ms = int(job_id[4:16], 16)
    except ValueError:
        return ""
    return f"dlv_{ms - ms % _DAY_MS:012x}" if job_id.startswith("dlv_") else ""


def _batch_floor(batch: Sequence[Mapping[str, Any]], claim_floor: str | None, below: str) -> str:
    """The floor of a settle: the day of its smallest job id at or above ``below`` (the
    ids under it are read anyway), or the claim's if smaller (a settle alone has none:
    ``None``)."""
    ids = [params["id"] for params in batch if params["id"] >= below]
    floor = day_floor(min(ids)) if ids else below
    if claim_floor is None:
        return floor
    return min(floor, claim_floor) if batch else claim_floor


def _one_per_event(items: Sequence[NewDelivery]) -> list[NewDelivery]:
    """The items one statement may carry: the first of each event, in order; the others
    wait for the next statement. The batcher folds repeats of one body, but one event may
    come in several bodies (a conflict): its journal row is updated once per statement
    (``UPDATE ... FROM`` with many matches picks one), so a second delivery of it in the
    same statement would get no answer."""
    now: list[NewDelivery] = []
    events: set[tuple[str, str]] = set()
    for item in items:
        event = (item.source, item.event_id)
        if event not in events:
            events.add(event)
            now.append(item)
    return now


class PostgresHotPath(HotPath):
    """On a store whose jobs are partitioned by day (migrations 028, 029), the worker's
    statements name the first day they can touch and the first day of jobs still there
    (what is below it is DEFAULT's), written in as constants
    (:func:`~hookinbox.store.sql.pinned`): their plans, made once, leave the days of
    finished jobs between the two out instead of locking every day at each run."""

    def __init__(self, db: Driver) -> None:
        super().__init__(db)
        self._floor = ""
        self._below = ""
        self._floor_at = -FLOOR_REFRESH
        self._partitioned = False
        #: (floor, below) -> (claim, settle, settle_and_claim) with them written in.
        self._pinned: dict[tuple[str, str], tuple[Sql, Sql, Sql]] = {}

    async def _claim_floor(self) -> str:
        """The first id a claim must read, asked again every :data:`FLOOR_REFRESH` (with
        :attr:`_below`)."""
        now = time.monotonic()
        if now - self._floor_at >= FLOOR_REFRESH:
            self._floor_at = now
            if not self._partitioned:
                self._partitioned = bool(await self._db.value(_HAS_JOB_FLOOR))
            if self._partitioned:
                found = await self._db.row(_JOB_FLOOR)
                if found is not None:
                    self._floor, self._below = found["floor"] or "", found["below"] or ""
        return self._floor

    def _statements(self, floor: str) -> tuple[Sql, Sql, Sql]:
        key = (floor, self._below)
        found = self._pinned.get(key)
        if found is None:
            if len(self._pinned) >= _PINNED_KEPT:
                for sql in self._pinned.pop(next(iter(self._pinned))):
                    self._db.dialect.forget(sql)
            claim, settle, turn = (
                pinned(pinned(sql, "floor", floor), "below", self._below)
                for sql in (_CLAIM, _SETTLE, _SETTLE_AND_CLAIM)
            )
            found = self._pinned[key] = (claim, settle, turn)
        return found

    async def reserve_batch(self, items: Sequence[NewDelivery]) -> list[Reservation]:
        answers: dict[str, Reservation] = {}
        pending = list(items)
        rounds = 0
        while pending:
            now = _one_per_event(pending)
            try:
                found = await self._reserve_once(now)
            except StoreError as exc:
                # Receivers in other processes may lock the same rows in another order.
                if not self._db.deadlocked(exc):
                    raise
                found = []
            # Columns in the statement's order; positional: keywords cost a dict per row.
            for outcome, request_id, delivery_id, first_sha256, conflict in found:
                if outcome != "notify":
                    answers[request_id] = Reservation(
                        outcome, delivery_id, bool(conflict), first_sha256 or ""
                    )
            # A row committed by a concurrent receiver after the statement's snapshot is
            # neither inserted nor visible to its update; such items go round again.
            if any(item.id not in answers for item in now):
                rounds += 1
                if rounds >= _RESERVE_ROUNDS:
                    raise StoreError("could not settle a reservation after repeated conflicts")
            pending = [item for item in pending if item.id not in answers]
        return [answers[item.id] for item in items]

    async def _reserve_once(self, items: Sequence[NewDelivery]) -> list[Any]:
        deliveries = [
            {
                "id": i.id,
                "source": i.source,
                "event_id": i.event_id,
                "event_type": i.event_type,
                "body_sha256": i.body_sha256,
                "n": n,
                "headers": i.headers,
                "seen": i.seen,
                "subject_hash": i.subject_hash,
            }
            for n, i in enumerate(items, 1)
        ]
        params = {
            "items": _json(deliveries),
            "jobs": _json(jobs_params(items)),
            "bodies": [i.body for i in items],
        }
        step = Step(_RESERVE, params, "rows", timeout=RESERVE_TIMEOUT)
        found: list[Any] = await self._db.run_held(one_step(step))
        return found

    async def claim(
        self, worker_id: str, limit: int, lease_seconds: float, order_grace: float = 0.0
    ) -> list[ClaimedJob]:
        token = new_lease_token()
        claim_sql, _, _ = self._statements(await self._claim_floor())
        found = await self._db.rows_planned_once(
            claim_sql,
            limit=limit,
            horizon=order_horizon(order_grace),
            token=token,
            worker=worker_id,
            lease=float(lease_seconds),
            **LEASE_EXPIRED,
        )
        return [ClaimedJob.from_row(r, token) for r in found]

    async def settle(self, batch: Sequence[Mapping[str, Any]]) -> list[bool]:
        _, settle_sql, _ = self._statements(_batch_floor(batch, None, self._below))
        found = await self._db.rows_planned_once(settle_sql, batch=_settle_batch(batch))
        settled = {r["id"] for r in found}
        return [params["id"] in settled for params in batch]

    async def settle_and_claim(
        self,
        batch: Sequence[Mapping[str, Any]],
        worker_id: str,
        limit: int,
        lease_seconds: float,
        order_grace: float = 0.0,
    ) -> tuple[list[bool], list[ClaimedJob]]:
        token = new_lease_token()
        claim_floor = await self._claim_floor()
        _, _, turn_sql = self._statements(_batch_floor(batch, claim_floor, self._below))
        found = await self._db.rows_planned_once(
            turn_sql,
            batch=_settle_batch(batch),
            limit=limit,
            horizon=order_horizon(order_grace),
            token=token,
            worker=worker_id,
            lease=float(lease_seconds),
            **LEASE_EXPIRED,
        )
        # One row holds the settled ids (and no job); every other row is a claimed job.
        (settled,) = [set(r["settled"]) for r in found if r["id"] is None]
        answers = [params["id"] in settled for params in batch]
        return answers, [ClaimedJob.from_row(r, token) for r in found if r["id"] is not None]

    async def fail_exhausted(self) -> int:
        return int(await self._db.value(_FAIL_EXHAUSTED, **LEASE_EXPIRED))
