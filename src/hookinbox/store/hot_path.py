"""Reserve, claim and settle: the hot path, run for every delivery and every job.

These are where the dialects part ways, so the journal and the queue hold a
:class:`HotPath` chosen by the store: this portable one runs the transactions below
(``queries/hot_path.sql``), which SQLite runs as they are on its writer thread, one commit
per batch; PostgreSQL's own (:class:`~hookinbox.store.hot_path_postgres.PostgresHotPath`)
does each in ONE statement. :func:`reserve_one` is also the first step of the inline
reservation, on both stores.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from hookinbox.codes import AttemptOutcome, JobCode
from hookinbox.errors import StoreError
from hookinbox.ids import delivery_id_floor
from hookinbox.store.records import (
    AttemptDetail,
    ClaimedJob,
    NewDelivery,
    Reservation,
    Settlement,
    SettleOutcome,
)
from hookinbox.store.sql import WAKE, Row, Step, Tx, count, many, rows
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_statements("hot_path")
_INSERT_DELIVERY = _SQL["insert_delivery"]
_ADD_DELIVERIES = _SQL["add_deliveries"]
_ADDED = _SQL["added"]
_INSERT_PAYLOAD = _SQL["insert_payload"]
_INSERT_JOB = _SQL["insert_job"]
_SEEN_AGAIN = _SQL["seen_again"]
_DUE = _SQL["due"]
_DUE_BUT_SETTLED = _SQL["due_but_settled"]
_EXPIRE_LEASES = _SQL["expire_leases"]
_CLAIM = _SQL["claim"]
_CLAIMED = _SQL["claimed"]
_HELD_LEASES = _SQL["held_leases"]
_END_SETTLED = _SQL["end_settled"]
_FINISH = _SQL["finish"]
_EXPIRE_EXHAUSTED = _SQL["expire_exhausted"]
_EXHAUSTED = _SQL["exhausted"]


def new_lease_token() -> str:
    """One claim's lease token: random, so a job whose token is ours is leased to us."""
    return secrets.token_hex(8)


def headers_text(headers: Mapping[str, str]) -> str:
    """The kept headers as the JSON text a payload row stores (read back with
    ``json.loads``). orjson does it in one C call; whatever it cannot encode (a lone
    surrogate, a key that is not text) is written by the standard library as before, so
    orjson never refuses a delivery that used to be stored."""
    try:
        return orjson.dumps(headers).decode()
    except orjson.JSONEncodeError:
        return json.dumps(headers)


def _delivery_params(item: NewDelivery) -> dict[str, Any]:
    """The parameters of :data:`_INSERT_DELIVERY` and :data:`_SEEN_AGAIN` (each binds the
    names it uses)."""
    return {
        "id": item.id,
        "source": item.source,
        "event_id": item.event_id,
        "event_type": item.event_type,
        "sha": item.body_sha256,
        "seen": item.seen,
        "subject_hash": item.subject_hash,
    }


def _duplicate(item: NewDelivery, first: Row) -> Reservation:
    return Reservation(
        "duplicate",
        first["id"],
        conflict=first["body_sha256"] != item.body_sha256,
        first_body_sha256=first["body_sha256"],
    )


def jobs_params(items: Sequence[NewDelivery]) -> list[dict[str, Any]]:
    """The job rows of ``items`` (each job's own attempts, else its delivery's), as both
    stores' reservations write them."""
    return [
        {
            "id": job.id,
            "delivery_id": item.id,
            "source": item.source,
            "action": job.action,
            "max_attempts": job.max_attempts or item.max_attempts,
            "order_key": job.order_key,
            "order_hold": job.order_hold,
        }
        for item in items
        for job in item.jobs
    ]


def reserve_one(item: NewDelivery) -> Tx[Reservation]:
    """The journal row, payload and jobs of a first delivery, or the last-seen, count and
    conflict of a repeat: never SELECT-then-INSERT, never a caught unique violation."""
    params = _delivery_params(item)
    if (yield Step(_INSERT_DELIVERY, params, "value")) is None:
        return _duplicate(item, (yield Step(_SEEN_AGAIN, params, "row")))
    yield count(_INSERT_PAYLOAD, id=item.id, body=item.body, headers=headers_text(item.headers))
    if item.jobs:
        yield many(_INSERT_JOB, jobs_params([item]))
    return Reservation("accepted", item.id)


def reserve_batch(items: Sequence[NewDelivery]) -> Tx[list[Reservation]]:
    """Every item in one transaction, answered in item order: what :func:`reserve_one`
    does to each, in a few statements for the whole batch (each a loop in C over one
    prepared statement on SQLite) instead of a few per item.

    The journal rows go in first, all at once (``ON CONFLICT DO NOTHING``: the unique
    index decides between two receivers, and between two items of one event in one
    batch, the first in item order winning); an item whose id is then a row was written
    by this insert (when every item wrote one, the count says so and nothing is read).
    The others are repeats: each one's row is counted again, one statement each, in
    item order (they are rare, and two of one event must both count). The payloads and
    jobs of the accepted ones follow, one statement each."""
    params = [_delivery_params(item) for item in items]
    written = yield many(_ADD_DELIVERIES, params)
    if written == len(items):
        added = {item.id for item in items}
    else:
        added = {r["id"] for r in (yield rows(_ADDED, ids=[item.id for item in items]))}
    answers = []
    for item, each in zip(items, params, strict=True):
        if item.id in added:
            answers.append(Reservation("accepted", item.id))
        else:
            answers.append(_duplicate(item, (yield Step(_SEEN_AGAIN, each, "row"))))
    accepted = [item for item in items if item.id in added]
    if accepted:
        yield many(
            _INSERT_PAYLOAD,
            [
                {"id": item.id, "body": item.body, "headers": headers_text(item.headers)}
                for item in accepted
            ],
        )
        jobs = jobs_params(accepted)
        if jobs:
            yield many(_INSERT_JOB, jobs)
        yield WAKE
    return answers


# -- claim -----------------------------------------------------------------------------


#: How an attempt whose lease ran out is written when its job is claimed again.
LEASE_EXPIRED = {"outcome": AttemptOutcome.LEASE_EXPIRED, "error": JobCode.LEASE_EXPIRED}


def order_horizon(order_grace: float) -> str:
    """The ``:horizon`` of a claim: a job of an ordered route is claimed only if its id is
    below it, i.e. made more than ``order_grace`` seconds ago (by the receiver's clock,
    ids being time-ordered). No grace: a floor a day ahead, which every id is below."""
    if order_grace <= 0:
        return delivery_id_floor(time.time() + 86400)
    return delivery_id_floor(time.time() - order_grace)


def claim(
    worker: str,
    limit: int,
    lease_seconds: float,
    token: str,
    settled: Sequence[str] = (),
    horizon: str = "",
) -> Tx[list[ClaimedJob]]:
    """Lease up to ``limit`` due jobs, none of ``settled`` (jobs this transaction settled);
    a lapsed lease taken over first gets its attempt written, from the old lease, as
    lease-expired. The ids are read once: SQLite's clock moves between statements, and a
    second ``{now}`` could find another set. A job of an ordered route waits behind its
    key (queries/hot_path.sql); ``horizon``: :func:`order_horizon`."""
    horizon = horizon or order_horizon(0)
    if settled:
        due = yield rows(_DUE_BUT_SETTLED, limit=limit, settled=list(settled), horizon=horizon)
    else:
        due = yield rows(_DUE, limit=limit, horizon=horizon)
    if not due:
        return []
    lapsed = [job["id"] for job in due if job["state"] == "processing"]
    if lapsed:
        yield count(_EXPIRE_LEASES, ids=lapsed, **LEASE_EXPIRED)
    leased = yield rows(
        _CLAIM, ids=[job["id"] for job in due], token=token, worker=worker, lease=lease_seconds
    )
    ids = [job["id"] for job in leased]
    found = {job["id"]: job for job in (yield rows(_CLAIMED, ids=ids))}
    return [ClaimedJob.from_row(found[job_id], token) for job_id in ids]


# -- settle: a finished attempt, or a lease that ran out -----------------------------------


_NO_DETAIL = AttemptDetail()


def settle_params(settlement: Settlement) -> dict[str, Any]:
    """One settlement as the parameters of :data:`_FINISH` and :data:`_END_SETTLED`
    (and of a row of PostgreSQL's batch)."""
    outcome = SettleOutcome(settlement.outcome)
    detail = settlement.detail or _NO_DETAIL
    return {
        "id": settlement.job_id,
        "token": settlement.lease_token,
        "state": outcome.job_state.value,
        "outcome": outcome.attempt_outcome.value,
        "error": settlement.error_code,
        "business_id": settlement.business_id,
        "delay": float(settlement.delay_seconds),
        "refund": int(outcome.gives_attempt_back),
        "target": detail.target,
        "http_status": detail.http_status,
        "snippet": detail.snippet,
        "duration_ms": detail.duration_ms,
    }


def settle(batch: Sequence[Mapping[str, Any]]) -> Tx[list[bool]]:
    """Write each job's attempt, ended, and move the job on, only while its lease is ours
    (the attempt first: it reads the lease the job's update clears); in one transaction
    (one commit for the whole batch). Answers, per item, whether it was ours.

    A few statements for the whole batch, not two per job: the leases are read once
    (whose they are cannot change before the commit: the rows are locked), then the
    attempts and the jobs are written for the settlements still holding theirs, each
    one prepared statement run per row (a loop in C on SQLite), each row still guarded
    by its own lease check. A job settles once per batch."""
    held = {r["id"]: r["lease_token"] for r in (yield rows(_HELD_LEASES, ids=_ids(batch)))}
    answers = []
    ours = []
    for params in batch:
        mine = held.get(params["id"]) == params["token"]
        if mine:
            del held[params["id"]]
            ours.append(params)
        answers.append(mine)
    if ours:
        ended = yield many(_END_SETTLED, ours)
        finished = yield many(_FINISH, ours)
        if (ended, finished) != (None, None) and (ended, finished) != (len(ours), len(ours)):
            # Cannot happen with the rows locked; should it, nothing of the batch stays.
            raise StoreError("a settle batch found a lease changed under its lock")
    return answers


def _ids(batch: Sequence[Mapping[str, Any]]) -> list[str]:
    return [params["id"] for params in batch]


def settle_and_claim(
    batch: Sequence[Mapping[str, Any]],
    worker: str,
    limit: int,
    lease_seconds: float,
    token: str,
    horizon: str = "",
) -> Tx[tuple[list[bool], list[ClaimedJob]]]:
    """A worker's loop turn in one transaction (one commit): the attempts that ended are
    settled (:func:`settle`), then up to ``limit`` due jobs claimed for the slots they
    freed (:func:`claim`), none of the jobs just settled (the next job of a key whose
    head just completed may be one of them: the settle is already visible)."""
    answers = yield from settle(batch)
    claimed = yield from claim(worker, limit, lease_seconds, token, _ids(batch), horizon)
    return answers, claimed


def fail_exhausted() -> Tx[int]:
    """Dead-letter the jobs whose lease ran out on their last attempt, that attempt written
    from the lease first (one ``{now}``: the same jobs both times)."""
    dead = yield rows(_EXPIRE_EXHAUSTED, **LEASE_EXPIRED)
    if dead:
        yield count(_EXHAUSTED, ids=[job["job_id"] for job in dead], **LEASE_EXPIRED)
    return len(dead)


class HotPath:
    """The portable hot path over a driver: each operation one transaction of the
    statements above. The journal and the queue hold one (PostgreSQL's is a subclass)."""

    def __init__(self, db: Driver) -> None:
        self._db = db

    async def reserve_batch(self, items: Sequence[NewDelivery]) -> list[Reservation]:
        """Every item in ONE commit, answered in item order."""
        return await self._db.run(reserve_batch(items))

    async def claim(
        self, worker_id: str, limit: int, lease_seconds: float, order_grace: float = 0.0
    ) -> list[ClaimedJob]:
        """``order_grace``: how old a job of an ordered route must be to be claimed
        (:func:`order_horizon`)."""
        return await self._db.run(
            claim(
                worker_id,
                limit,
                lease_seconds,
                new_lease_token(),
                horizon=order_horizon(order_grace),
            )
        )

    async def settle(self, batch: Sequence[Mapping[str, Any]]) -> list[bool]:
        """Settle leased jobs (:func:`settle_params`) in ONE commit; per item, whether
        its lease was still ours."""
        return await self._db.run(settle(batch))

    async def settle_and_claim(
        self,
        batch: Sequence[Mapping[str, Any]],
        worker_id: str,
        limit: int,
        lease_seconds: float,
        order_grace: float = 0.0,
    ) -> tuple[list[bool], list[ClaimedJob]]:
        """:meth:`settle` and :meth:`claim` (none of the jobs just settled) in ONE
        commit: a worker's loop turn."""
        return await self._db.run(
            settle_and_claim(
                batch,
                worker_id,
                limit,
                lease_seconds,
                new_lease_token(),
                order_horizon(order_grace),
            )
        )

    async def fail_exhausted(self) -> int:
        return await self._db.run(fail_exhausted())
