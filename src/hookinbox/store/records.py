"""The records the store exchanges with its callers, and how each is read from a row.

One time type: every time in a record or a query object is a timezone-aware UTC
``datetime`` (durations stay float seconds). Rows come from ``sqlite3.Row`` or
``asyncpg.Record``, both read as ``row["column"]``; a record is built from one by
:meth:`Record.from_row` with the driver's ``decode_time`` (SQLite keeps REAL unix
seconds, PostgreSQL timestamptz). Every ``as_json`` holds ids, codes, counts and times,
never a payload. The operators' records are in :mod:`hookinbox.store.operator_records`,
tracked resources' and the outbox's in :mod:`hookinbox.store.resource_records`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime
from typing import Any, Literal, Self, TypeVar

import orjson

from hookinbox.codes import JobState as JobState
from hookinbox.codes import SettleOutcome as SettleOutcome
from hookinbox.store.sql import DecodeTime, Row

#: The job states as plain strings, for choices and filters.
JOB_STATES: tuple[str, ...] = tuple(state.value for state in JobState)
DeliveryStatus = Literal["accepted", "processing", "completed", "failed"]

R = TypeVar("R")


_COLUMNS: dict[type, tuple[tuple[str, str], ...]] = {}


def _columns(cls: type) -> tuple[tuple[str, str], ...]:
    """``(field, how to read it)`` for the fields a row fills (those without a default)."""
    found = _COLUMNS.get(cls)
    if found is None:
        found = _COLUMNS[cls] = tuple(
            (f.name, "time" if "datetime" in str(f.type) else "bool" if f.type == "bool" else "")
            for f in fields(cls)
            if f.default is MISSING and f.default_factory is MISSING
        )
    return found


def build(cls: type[R], row: Row, decode_time: DecodeTime, **given: Any) -> R:
    """``cls`` from the row's columns of the same names: times through ``decode_time``,
    booleans through ``bool`` (SQLite answers 0/1); ``given`` fields win."""
    values = dict(given)
    for name, kind in _columns(cls):
        if name not in values:
            raw = row[name]
            values[name] = (
                decode_time(raw) if kind == "time" else bool(raw) if kind == "bool" else raw
            )
    return cls(**values)


class Record:
    """A record whose fields are columns of the same names (override for the others)."""

    __slots__ = ()

    @classmethod
    def from_row(cls, row: Row, decode_time: DecodeTime, **given: Any) -> Self:
        return build(cls, row, decode_time, **given)


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def _json(text: str | None) -> Any:
    return json.loads(text) if text is not None else None


def no_times(value: Any) -> datetime | None:
    raise TypeError("this record has no time column")


# -- receiving -----------------------------------------------------------------------
# The records of this section are built per delivery on the receive path, so they are not
# frozen: a frozen dataclass's constructor sets each field through ``object.__setattr__``,
# three times the cost of a plain one (about 1 µs per record). Nothing changes one after
# it is built.


@dataclass(slots=True)
class NewJob:
    id: str
    action: str
    #: The attempts its route allows (a retry schedule's length + 1); None: the delivery's.
    max_attempts: int | None = None
    #: An ordered route's key for this job (bounded, unique per route): jobs of one key
    #: are claimed one at a time, in id order. None: the job runs unordered.
    order_key: str | None = None
    #: Whether a dead letter of this key holds it (``on_dead_letter = "hold"``).
    order_hold: bool = False


@dataclass(slots=True)
class NewDelivery:
    """A verified delivery ready to be reserved, with the jobs its routes produce."""

    id: str
    source: str
    event_id: str
    event_type: str
    body_sha256: str
    body: bytes
    #: The headers a forward needs again (content type and the provider's signature headers).
    headers: dict[str, str]
    jobs: tuple[NewJob, ...]
    max_attempts: int
    #: How many identical deliveries of this event the batch folded into this one.
    seen: int = 1
    #: The keyed hash of the delivery's data subject (never the value), for erasure.
    subject_hash: str | None = None


@dataclass(slots=True)
class Reservation:
    """The answer to one reservation: accepted (first time) or duplicate."""

    outcome: Literal["accepted", "duplicate"]
    delivery_id: str
    #: A duplicate whose body hash differs from the first delivery's.
    conflict: bool = False
    #: The body hash recorded by the first delivery (to log both on a conflict).
    first_body_sha256: str = ""


# -- working -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """A job leased to one worker until its lease expires; ``lease_token`` proves it."""

    id: str
    delivery_id: str
    source: str
    action: str
    attempts: int
    max_attempts: int
    lease_token: str
    event_id: str
    event_type: str
    trigger: str
    #: None once the payload is purged.
    body: bytes | None
    headers: dict[str, str]

    @classmethod
    def from_row(cls, row: Row, lease_token: str) -> ClaimedJob:
        """From a claim's row joined with its delivery and payload (no times in it)."""
        body, headers = row["body"], row["headers"]
        # Field by field, not through build(): this runs once per claimed job.
        return cls(
            id=row["id"],
            delivery_id=row["delivery_id"],
            source=row["source"],
            action=row["action"],
            attempts=row["attempts"],
            max_attempts=row["max_attempts"],
            lease_token=lease_token,
            event_id=row["event_id"],
            event_type=row["event_type"],
            trigger=row["trigger"],
            body=bytes(body) if body is not None else None,
            # Kept headers are JSON of latin-1 text both stores wrote: orjson reads them
            # several times faster, once per claimed job.
            headers=orjson.loads(headers) if headers else {},
        )


@dataclass(frozen=True, slots=True)
class Settlement:
    """The end of one leased attempt, as a worker hands it to ``store.queue.settle_jobs``.

    Small and flat so that many settle in one statement. It applies only while
    ``lease_token`` still holds the job's lease: a worker that lost its lease cannot
    overwrite what another worker did.
    """

    job_id: str
    lease_token: str
    outcome: SettleOutcome
    #: The attempt's error code (``codes.py``); also the job's ``last_error``.
    error_code: str | None = None
    #: When a retried or deferred job is due again: this long after the database's now.
    delay_seconds: float = 0.0
    #: What a completed job made (the effect's id), shown to operators.
    business_id: str | None = None
    #: What the attempt met (target, status, response snippet, duration), kept with it.
    detail: AttemptDetail | None = None


@dataclass(frozen=True, slots=True)
class EffectRecord(Record):
    key: str
    state: Literal["started", "recorded"]
    job_id: str | None
    result: Any
    created_at: datetime
    recorded_at: datetime | None

    @classmethod
    def from_row(cls, row: Row, decode_time: DecodeTime, **given: Any) -> Self:
        return build(cls, row, decode_time, result=_json(row["result"]), **given)


@dataclass(frozen=True, slots=True)
class EffectStart:
    """The answer of ``start_effect``."""

    record: EffectRecord
    #: This call wrote the ``started`` row: nobody made the effect before.
    created: bool
    #: The row was started by another job that still holds a live lease: its effect may
    #: be under way right now, so this job must not look it up or make it again yet.
    held_by_live_job: bool


# -- reading -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobView(Record):
    id: str
    action: str
    state: JobState
    attempts: int
    max_attempts: int
    last_error: str | None
    next_attempt_at: datetime | None
    lease_expires_at: datetime | None
    business_id: str | None
    created_at: datetime
    updated_at: datetime

    def as_json(self) -> dict[str, Any]:
        return {
            "job_id": self.id,
            "action": self.action,
            "state": self.state,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "last_error": self.last_error,
            "next_attempt_at": iso(self.next_attempt_at) if self.state == "accepted" else None,
            "lease_expires_at": iso(self.lease_expires_at) if self.state == "processing" else None,
            "business_id": self.business_id,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
        }


@dataclass(frozen=True, slots=True)
class WaitingBehind(Record):
    """The head of an ordered job's key, which the job waits behind (docs/concepts/ordering.md)."""

    id: str
    delivery_id: str
    state: JobState
    attempts: int
    max_attempts: int
    last_error: str | None
    #: Unfinished jobs of the key before the waiting one (the head included).
    ahead: int

    def as_json(self) -> dict[str, Any]:
        return {
            "job_id": self.id,
            "delivery_id": self.delivery_id,
            "state": self.state,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "last_error": self.last_error,
            "ahead": self.ahead,
        }


@dataclass(frozen=True, slots=True)
class AttemptDetail:
    """What one attempt met, kept with it when it is settled (issue 12): never the
    payload that was sent, only where it went and what came back."""

    #: A forward's host and path (never its query), or the handler's name.
    target: str | None = None
    #: The target's HTTP status, when it answered.
    http_status: int | None = None
    #: At most 512 UTF-8 bytes of the target's answer, control characters removed.
    snippet: str | None = None
    #: How long the action ran, in milliseconds.
    duration_ms: int | None = None


@dataclass(frozen=True, slots=True)
class AttemptView(Record):
    number: int
    trigger: str
    worker: str
    started_at: datetime
    ended_at: datetime | None
    outcome: str | None
    error_code: str | None
    target: str | None
    http_status: int | None
    response_snippet: str | None
    duration_ms: int | None
    #: When the job was due again after this attempt (a retry or a deferral).
    next_attempt_at: datetime | None

    def as_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "trigger": self.trigger,
            "worker": self.worker,
            "started_at": iso(self.started_at),
            "ended_at": iso(self.ended_at),
            "outcome": self.outcome,
            "error_code": self.error_code,
            "target": self.target,
            "http_status": self.http_status,
            "response_snippet": self.response_snippet,
            "duration_ms": self.duration_ms,
            "next_attempt_at": iso(self.next_attempt_at),
        }


@dataclass(frozen=True, slots=True)
class DeliveryView(Record):
    id: str
    source: str
    event_id: str
    event_type: str
    body_sha256: str
    first_seen_at: datetime
    last_seen_at: datetime
    delivery_count: int
    conflicts: int
    payload_retained: bool
    #: ``webhook`` (received) or ``catch_up`` (pulled from the provider's API).
    origin: str
    jobs: tuple[JobView, ...] = field(default=())
    #: Set by list queries, which do not load the jobs themselves.
    job_states: tuple[JobState, ...] = field(default=())

    @classmethod
    def listed(cls, row: Row, decode_time: DecodeTime) -> DeliveryView:
        """From a list query's row, whose ``states`` column joins the jobs' states."""
        states = tuple(row["states"].split(",")) if row["states"] else ()
        return build(cls, row, decode_time, job_states=states)

    @property
    def status(self) -> DeliveryStatus:
        return delivery_status(self.job_states or tuple(job.state for job in self.jobs))

    def as_json(self) -> dict[str, Any]:
        return {
            "delivery_id": self.id,
            "source": self.source,
            "event_id": self.event_id,
            "type": self.event_type,
            "status": self.status,
            "first_seen_at": iso(self.first_seen_at),
            "last_seen_at": iso(self.last_seen_at),
            "delivery_count": self.delivery_count,
            "conflicts": self.conflicts,
            "body_sha256": self.body_sha256,
            "payload_retained": self.payload_retained,
            "origin": self.origin,
            "jobs": [job.as_json() for job in self.jobs],
        }


def delivery_status(states: Sequence[JobState]) -> DeliveryStatus:
    """The contract: completed when every job is, failed when any is, processing when any
    is leased, else accepted. A delivery no route matched has nothing left to do."""
    if "failed" in states:
        return "failed"
    if "processing" in states:
        return "processing"
    if all(state == "completed" for state in states):
        return "completed"
    return "accepted"


@dataclass(frozen=True, slots=True)
class PayloadMatch:
    """A retained payload whose JSON value at ``path`` (keys joined by dots, each
    ``[A-Za-z0-9_-]``) equals ``value_json`` (a JSON scalar as text). ``needle`` is bytes
    every matching body holds (the value as typed), checked before any JSON is parsed, so
    the cost is a byte search over the window's payloads, then a parse of the few that
    hold it; empty when the value could be escaped in the body."""

    path: str
    value_json: str
    needle: bytes = b""

    def matches(self, body: bytes) -> bool:
        """What the SQL of ``{payload_is}`` decides, for a body read in Python (a sealed
        one, opened): a JSON object whose value at ``path`` is the value (``true`` is not
        ``1``); a body that is not JSON never matches."""
        if self.needle and self.needle not in body:
            return False
        try:
            found: Any = orjson.loads(body)
        except orjson.JSONDecodeError:
            return False
        for key in self.path.split("."):
            if not isinstance(found, dict) or key not in found:
                return False
            found = found[key]
        wanted = orjson.loads(self.value_json)
        if isinstance(found, bool) or isinstance(wanted, bool) or None in (found, wanted):
            return found is wanted
        if isinstance(found, dict | list):
            return False
        if isinstance(found, str) or isinstance(wanted, str):
            return isinstance(found, str) and isinstance(wanted, str) and found == wanted
        return bool(found == wanted)  # numbers: 1 and 1.0 are one value, as in jsonb


@dataclass(frozen=True, slots=True)
class DeadLetterCriteria:
    """Which failed jobs a dead-letter query takes: every field optional; ``reason`` is
    the last error; times are failure times (``since`` inclusive, ``until`` exclusive)."""

    source: str | None = None
    action: str | None = None
    reason: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def params(self) -> dict[str, object]:
        """The criteria as the dead-letter statements' parameters."""
        return {
            "source": self.source,
            "action": self.action,
            "reason": self.reason,
            "since": self.since,
            "until": self.until,
        }


#: The criteria every dead letter meets.
EVERY_DEAD_LETTER = DeadLetterCriteria()


@dataclass(frozen=True, slots=True)
class DeliverySearch:
    """A keyset page of the journal, newest first. ``since``/``until`` become bounds on
    the time-ordered delivery id, so the primary key serves them (and the payloads' key,
    for a payload match). ``type_pattern`` is a lower-case LIKE pattern (``\\`` escapes),
    matched against the lower-cased event type."""

    ref: str | None = None  # a delivery id or an event id
    source: str | None = None
    type_pattern: str | None = None
    status: DeliveryStatus | None = None
    since: datetime | None = None
    until: datetime | None = None
    payload: PayloadMatch | None = None
    before: str | None = None  # the last delivery id of the previous page
    limit: int = 50
