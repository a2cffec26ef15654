"""PostgreSQL's hot path: reserve, claim and settle, each ONE statement (one round trip).

The statements are ``postgres/hot_path.sql``; here is what they take and answer. A batch
travels as JSON parameters encoded by orjson in one C call (cheaper for the receiver
than the driver encoding an array per column); a value JSON cannot carry (a lone
surrogate) is the row's fault, like a value PostgreSQL refuses, so the journal answers
that row alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

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
from hookinbox.store.sql import Step, one_step
from hookinbox.store.statements import load_postgres_statements

_SQL = load_postgres_statements("hot_path")
_RESERVE = _SQL["reserve"]
_CLAIM = _SQL["claim"]
_SETTLE = _SQL["settle"]
_SETTLE_AND_CLAIM = _SQL["settle_and_claim"]
_FAIL_EXHAUSTED = _SQL["fail_exhausted"]

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
        found = await self._db.rows_planned_once(
            _CLAIM,
            limit=limit,
            horizon=order_horizon(order_grace),
            token=token,
            worker=worker_id,
            lease=float(lease_seconds),
            **LEASE_EXPIRED,
        )
        return [ClaimedJob.from_row(r, token) for r in found]

    async def settle(self, batch: Sequence[Mapping[str, Any]]) -> list[bool]:
        found = await self._db.rows_planned_once(_SETTLE, batch=_settle_batch(batch))
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
        found = await self._db.rows_planned_once(
            _SETTLE_AND_CLAIM,
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
