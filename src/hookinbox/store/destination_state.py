"""Destinations shared by every worker process: a token bucket, the forwards under way
and a circuit breaker, each decided with the destination's row locked.

A forward to a named destination first :meth:`Destinations.admit`\\ s its job: in one
transaction the row is locked (``FOR UPDATE`` on PostgreSQL, the one writer on SQLite),
the bucket refilled by the time since its last refill (database clock), the live slots
counted, and the job either admitted (a token taken, a slot row written for this lease)
or held with a code and a wait. After the POST, :meth:`Destinations.release` drops the
slot and counts a failure (``circuit_failures`` in a row open the circuit) or a success
(which closes it). An open circuit holds every job until its cool-down ends; then one
job is the probe (``probe_until``) and the others stay held until it answers. A slot whose worker
died runs out at its ``expires_at``, so a crash never leaks capacity for long; until then
it counts, also when its job is claimed again (the dead worker's forward may still be at
the target), since each lease holds a slot of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from hookinbox.admission import Admission, DestinationLimits, GateReading, admit_forward
from hookinbox.store.sql import Tx, count, row, value
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver


@dataclass(frozen=True, slots=True)
class Release:
    """What the release changed: the circuit ``opened`` (N failures in a row, or a
    failed probe) or ``closed`` (a success while it was open)."""

    opened: bool = False
    closed: bool = False


@dataclass(frozen=True, slots=True)
class DestinationState:
    """A destination as the admin and the metrics show it."""

    name: str
    tokens: float
    in_flight: int
    failures: int
    #: Seconds since the circuit opened; None while it is closed (the caller, who knows
    #: the cool-down, tells open from half-open).
    open_for: float | None
    opened_at: datetime | None
    last_opened_at: datetime | None
    openings: int


_SQL = load_statements("destination_state")
_ENSURE = _SQL["ensure"]
#: Every transaction here starts with a statement holding ``{soft_commit}``: the state is
#: soft (a lost slot or token after a PostgreSQL crash is harmless), so its commits do
#: not wait for the WAL flush, the bulk of their cost (bench/destination_gate.py).
_LOCK = _SQL["lock"]
_SOFT = _SQL["soft"]
#: Counted in a statement of its own, AFTER the lock: on PostgreSQL (read committed) a
#: subquery of the locking statement would read the snapshot taken before it waited for
#: the lock, and miss the slot the previous holder just wrote.
_IN_FLIGHT = _SQL["in_flight"]
_TAKE = _SQL["take"]
_SLOT = _SQL["slot"]
#: This lease's slot, and any of the destination's that ran out (their worker died); a
#: slot of the same job's earlier lease holds until it runs out.
_DROP_SLOT = _SQL["drop_slot"]
_CIRCUIT = _SQL["circuit"]
_SUCCEEDED = _SQL["succeeded"]
_FAILED = _SQL["failed"]
_STATES = _SQL["states"]


def _admit(name: str, job_id: str, token: str, limits: DestinationLimits) -> Tx[Admission]:
    locked = yield row(_LOCK, name=name)
    if locked is None:  # the destination's first forward ever (a durable commit, once)
        yield count(_ENSURE, name=name, burst=float(limits.burst))
        locked = yield row(_LOCK, name=name)
    in_flight = 0
    if limits.max_in_flight is not None:
        in_flight = int((yield value(_IN_FLIGHT, name=name, job=job_id, token=token)) or 0)
    reading = GateReading(
        tokens=float(locked["tokens"]),
        since_refill=None if locked["since_refill"] is None else float(locked["since_refill"]),
        open_for=None if locked["open_for"] is None else float(locked["open_for"]),
        probing=bool(locked["probing"]),
        in_flight=in_flight,
    )
    answer, tokens = admit_forward(limits, reading)
    if not answer.admitted:
        return answer
    slot = float(limits.slot_seconds)
    yield count(_TAKE, name=name, tokens=tokens, probe=int(answer.probe), slot=slot)
    if limits.max_in_flight is not None:
        yield count(_SLOT, name=name, job=job_id, token=token, slot=slot)
    return answer


def _release(
    name: str, job_id: str, token: str, healthy: bool | None, opens_after: int | None
) -> Tx[Release]:
    if healthy is None or opens_after is None:
        yield row(_SOFT)
        yield count(_DROP_SLOT, job=job_id, token=token, name=name)
        return Release()
    state = yield row(_CIRCUIT, name=name)
    yield count(_DROP_SLOT, job=job_id, token=token, name=name)
    if state is None:
        return Release()
    was_open = bool(state["open"])
    if healthy:
        if was_open or state["failures"]:
            yield count(_SUCCEEDED, name=name)
        return Release(closed=was_open)
    # A failed probe opens the circuit again (a new cool-down); N in a row open it.
    opens = was_open or int(state["failures"]) + 1 >= opens_after
    newly = opens and not was_open
    yield count(_FAILED, name=name, opens=int(opens), newly=int(newly))
    return Release(opened=newly)


class Destinations:
    def __init__(self, db: Driver) -> None:
        self._db = db

    async def admit(
        self, name: str, job_id: str, lease_token: str, limits: DestinationLimits
    ) -> Admission:
        """Admit the forward of the job's lease ``lease_token`` to ``name`` now, or say
        why and how long it waits: the rule (:func:`hookinbox.admission.admit_forward`)
        judges the row locked here."""
        return await self._db.run(_admit(name, job_id, lease_token, limits))

    async def release(
        self,
        name: str,
        job_id: str,
        lease_token: str,
        *,
        healthy: bool | None,
        opens_after: int | None,
    ) -> Release:
        """The forward of that lease ended: drop its slot; ``healthy`` True (the target
        answered), False (no answer, 5xx, 429) or None (nothing learnt) moves the circuit."""
        return await self._db.run(_release(name, job_id, lease_token, healthy, opens_after))

    async def states(self) -> list[DestinationState]:
        """Every destination used so far, with its circuit (for the admin and metrics)."""
        found = await self._db.rows(_STATES)
        decode = self._db.decode_time
        return [
            DestinationState(
                name=r["name"],
                tokens=float(r["tokens"]),
                in_flight=int(r["in_flight"]),
                failures=int(r["failures"]),
                open_for=None if r["open_for"] is None else float(r["open_for"]),
                opened_at=decode(r["opened_at"]),
                last_opened_at=decode(r["last_opened_at"]),
                openings=int(r["openings"]),
            )
            for r in found
        ]
