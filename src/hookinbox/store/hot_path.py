"""Reserve, claim and settle: the portable transactions, and the SQL they are made of.

These three run for every delivery, so they are where the dialects part ways: SQLite
runs the transactions below as they are, on its writer thread, one commit per batch;
PostgreSQL (``store/postgres/statements.py``) composes each into ONE statement from the
same fragments (data-modifying CTEs, ``FOR UPDATE SKIP LOCKED``), one round trip each.
:func:`reserve_one` is also the first step of the inline reservation, on both stores.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from hookinbox.codes import AttemptOutcome, JobCode
from hookinbox.errors import StoreError
from hookinbox.store.records import (
    AttemptDetail,
    ClaimedJob,
    NewDelivery,
    Reservation,
    Settlement,
    SettleOutcome,
)
from hookinbox.store.sql import WAKE, Row, Sql, Step, Tx, count, many, rows

# -- fragments (shared with the PostgreSQL statements) --------------------------------

#: Jobs a worker may take: due and waiting, or leased by a worker that stopped renewing
#: the lease while attempts are left.
#: Each half alone matches a partial index (``jobs_due_idx``, ``jobs_lease_idx``); the
#: claim reads them apart, since an OR of the two makes PostgreSQL scan the whole table
#: and SQLite sort every due job.
DUE_ACCEPTED = "state = 'accepted' AND next_attempt_at <= {now}"
LEASE_LAPSED = "state = 'processing' AND lease_expires_at < {now} AND attempts < max_attempts"
LEASE_JOB = (
    "state = 'processing', attempts = attempts + 1, lease_token = :token, leased_by = :worker,"
    " leased_at = {now}, lease_expires_at = {now} + {secs:lease}, updated_at = {now}"
)
CLAIMED_COLUMNS = "id, delivery_id, source, action, attempts, max_attempts, trigger"

# An attempt row is written once, complete, when its attempt ends: by the settle, or for a
# lease that ran out, by the re-claim or the exhausted-lease sweep. Until then the running
# attempt is the leased job itself (number ``attempts``, worker ``leased_by``, started at
# ``leased_at``): one insert per attempt, no update, no row the settle has to find.

#: An ended attempt's columns, and a settled one's (what it met, when the job is due).
ATTEMPT_COLUMNS = "job_id, number, trigger, worker, started_at, ended_at, outcome, error_code"
SETTLED_ATTEMPT_COLUMNS = (
    ATTEMPT_COLUMNS + ", target, http_status, response_snippet, duration_ms, next_attempt_at"
)


def lease_attempt(job: str) -> str:
    """The attempt a job's lease holds, ending now: its number and trigger, the worker and
    claim time of the lease (``job`` prefixes the columns of the job row as the claim
    left it, read before anything overwrites the lease)."""
    return f"{job}id, {job}attempts, {job}trigger, {job}leased_by, {job}leased_at, {{now}}"


def end_attempts_from(job: str = "") -> str:
    """Writing the attempt each leased job of a set holds, ended now with ``:outcome`` and
    ``:error`` (a lease that ran out: :data:`LEASE_EXPIRED`; a resource route's settle):
    the FROM clause and its rows follow; ``job`` as in :func:`lease_attempt`."""
    return (
        f"INSERT INTO attempts ({ATTEMPT_COLUMNS})"
        f" SELECT {lease_attempt(job)}, :outcome, :error FROM "
    )


def settled_attempt_values(value: str, delay: str) -> str:
    """A settled attempt's outcome and error, what it met (an :class:`AttemptDetail`)
    and, when the job waits again, when it is due: the values after
    :func:`lease_attempt`. ``value`` and ``delay`` as in :func:`finish_job_set`, so one
    batch of PostgreSQL writes exactly what one settle does."""
    return (
        f"{value}outcome, {value}error, {value}target, {value}http_status, {value}snippet,"
        f" {value}duration_ms, CASE WHEN {value}state = 'accepted' THEN {{now}} + {delay} END"
    )


#: Ending a lease (of a job or an outbox row). A job's ``leased_at`` stays: when it was
#: last claimed, read only while the job is processing.
CLEAR_LEASE = "lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = {now}"


def mark_ended(state: str) -> str:
    """The completion or failure time of a job settling into ``state`` (an SQL value)."""
    return (
        f"completed_at = CASE WHEN {state} = 'completed' THEN {{now}} ELSE completed_at END,"
        f" failed_at = CASE WHEN {state} = 'failed' THEN {{now}} ELSE failed_at END"
    )


MARK_ENDED = mark_ended(":state")


def finish_job_set(value: str, delay: str) -> str:
    """Settling a leased job: the attempt ends, the job moves on (``refund`` gives the
    attempt back when the job only waited on something outside itself). ``value``
    prefixes each settled value: ``:`` for parameters, a column prefix where many jobs
    settle at once from a set of rows (PostgreSQL); ``delay`` is the SQL interval."""
    return (
        f"state = {value}state, last_error = coalesce({value}error, last_error),"
        f" business_id = coalesce({value}business_id, business_id),"
        f" next_attempt_at = {{now}} + {delay}, max_attempts = max_attempts + {value}refund, "
        + mark_ended(f"{value}state")
        + ", "
        + CLEAR_LEASE
    )


FINISH_JOB = finish_job_set(":", "{secs:delay}")
LEASE_HELD = "id = :id AND lease_token = :token AND state = 'processing'"
#: A lease that ran out on the job's last attempt: its worker died, the job is dead.
EXHAUST_JOB = "state = 'failed', last_error = :error, failed_at = {now}, " + CLEAR_LEASE
LEASE_EXHAUSTED = "state = 'processing' AND lease_expires_at < {now} AND attempts >= max_attempts"

# -- reserve ---------------------------------------------------------------------------

_DELIVERY_VALUES = (
    "INSERT INTO deliveries (id, source, event_id, event_type, body_sha256, delivery_count,"
    " first_seen_at, last_seen_at)"
    " VALUES (:id, :source, :event_id, :event_type, :sha, :seen, {now}, {now})"
    " ON CONFLICT (source, event_id) DO NOTHING"
)
_INSERT_DELIVERY = Sql(_DELIVERY_VALUES + " RETURNING id")
#: The batch's form: run once per item in one prepared statement (``many``).
_ADD_DELIVERIES = Sql(_DELIVERY_VALUES)
#: Which of the batch's ids are rows now: the ones its insert wrote. The ids are the
#: receiver's own (:func:`~hookinbox.ids.new_delivery_id`, plain ASCII), so they travel
#: exactly as a list parameter (SQLite's ``json_each``).
_ADDED = Sql("SELECT id FROM deliveries WHERE id {in:ids}")
_INSERT_PAYLOAD = Sql(
    "INSERT INTO payloads (delivery_id, body, headers) VALUES (:id, :body, :headers)"
)
_INSERT_JOB = Sql(
    "INSERT INTO jobs (id, delivery_id, source, action, max_attempts, next_attempt_at,"
    " created_at, updated_at)"
    " VALUES (:id, :delivery_id, :source, :action, :max_attempts, {now}, {now}, {now})"
)
_SEEN_AGAIN = Sql(
    "UPDATE deliveries SET last_seen_at = {now}, delivery_count = delivery_count + :seen,"
    " conflicts = conflicts + :seen * CAST(body_sha256 <> :sha AS INTEGER)"
    " WHERE source = :source AND event_id = :event_id RETURNING id, body_sha256"
)


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


def _due(but: str = "") -> Sql:
    """The first ``:limit`` due jobs, by when each became due, from two scans each in its
    partial index's order and stopped at the limit (an OR of the two made SQLite read
    and sort every due job, at every claim: a drain's claims cost grew with the queue).
    ``but`` narrows both scans."""
    return Sql(
        "SELECT id, state FROM ("
        " SELECT * FROM (SELECT id, state, next_attempt_at AS due_at FROM jobs"
        f" WHERE {DUE_ACCEPTED}{but} ORDER BY next_attempt_at LIMIT :limit)"
        " UNION ALL"
        " SELECT * FROM (SELECT id, state, lease_expires_at AS due_at FROM jobs"
        f" WHERE {LEASE_LAPSED}{but} ORDER BY lease_expires_at LIMIT :limit)"
        ") AS due ORDER BY due_at LIMIT :limit"
    )


_DUE = _due()
#: The due jobs but those of ``:settled``: a claim riding on a settle never takes back
#: a job the same transaction has just settled (a retry due at once, say).
_DUE_BUT_SETTLED = _due(" AND NOT (id {in:settled})")
_EXPIRE_LEASES = Sql(end_attempts_from() + "jobs WHERE id {in:ids}")
_CLAIM = Sql(f"UPDATE jobs SET {LEASE_JOB} WHERE id {{in:ids}} RETURNING {CLAIMED_COLUMNS}")
_CLAIMED = Sql(
    "SELECT j.id, j.delivery_id, j.source, j.action, j.attempts, j.max_attempts, j.trigger,"
    " d.event_id, d.event_type, p.body, p.headers"
    " FROM jobs j JOIN deliveries d ON d.id = j.delivery_id"
    " LEFT JOIN payloads p ON p.delivery_id = j.delivery_id WHERE j.id {in:ids}"
)

#: How an attempt whose lease ran out is written when its job is claimed again.
LEASE_EXPIRED = {"outcome": AttemptOutcome.LEASE_EXPIRED, "error": JobCode.LEASE_EXPIRED}


def claim(
    worker: str, limit: int, lease_seconds: float, token: str, settled: Sequence[str] = ()
) -> Tx[list[ClaimedJob]]:
    """Lease up to ``limit`` due jobs, none of ``settled`` (jobs this transaction settled);
    a lapsed lease taken over first gets its attempt written, from the old lease, as
    lease-expired. The ids are read once: SQLite's clock moves between statements, and a
    second ``{now}`` could find another set."""
    if settled:
        due = yield rows(_DUE_BUT_SETTLED, limit=limit, settled=list(settled))
    else:
        due = yield rows(_DUE, limit=limit)
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

_FINISH = Sql(f"UPDATE jobs SET {FINISH_JOB} WHERE {LEASE_HELD}")
_END_SETTLED = Sql(
    f"INSERT INTO attempts ({SETTLED_ATTEMPT_COLUMNS})"
    f" SELECT {lease_attempt('')}, {settled_attempt_values(':', '{secs:delay}')}"
    f" FROM jobs WHERE {LEASE_HELD}"
)
#: The attempt of a job settled outside :func:`settle` (a resource route's, in its own
#: transaction, the lease checked by its caller): before the job's lease is cleared.
END_LEASED_ATTEMPT = Sql(end_attempts_from() + "jobs WHERE id = :id AND state = 'processing'")


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


#: The leases the jobs of a settle batch hold now (locked on PostgreSQL; SQLite's write
#: lock already keeps them until the commit).
_HELD_LEASES = Sql(
    "SELECT id, lease_token FROM jobs WHERE id {in:ids} AND state = 'processing' {for_update}"
)


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
    batch: Sequence[Mapping[str, Any]], worker: str, limit: int, lease_seconds: float, token: str
) -> Tx[tuple[list[bool], list[ClaimedJob]]]:
    """A worker's loop turn in one transaction (one commit): the attempts that ended are
    settled (:func:`settle`), then up to ``limit`` due jobs claimed for the slots they
    freed (:func:`claim`), none of the jobs just settled."""
    answers = yield from settle(batch)
    claimed = yield from claim(worker, limit, lease_seconds, token, _ids(batch))
    return answers, claimed


#: Renewing every lease a worker holds, in one statement. A lease token is one claim's
#: and random: a job whose token is one of ours is leased to us.
RENEW_LEASES = Sql(
    "UPDATE jobs SET lease_expires_at = {now} + {secs:lease}"
    " WHERE id {in:ids} AND lease_token {in:tokens} AND state = 'processing' RETURNING id"
)


_EXPIRE_EXHAUSTED = Sql(end_attempts_from() + f"jobs WHERE {LEASE_EXHAUSTED} RETURNING job_id")
_EXHAUSTED = Sql(f"UPDATE jobs SET {EXHAUST_JOB} WHERE id {{in:ids}}")


def fail_exhausted() -> Tx[int]:
    """Dead-letter the jobs whose lease ran out on their last attempt, that attempt written
    from the lease first (one ``{now}``: the same jobs both times)."""
    dead = yield rows(_EXPIRE_EXHAUSTED, **LEASE_EXPIRED)
    if dead:
        yield count(_EXHAUSTED, ids=[job["job_id"] for job in dead], **LEASE_EXPIRED)
    return len(dead)
