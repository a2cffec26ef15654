"""Whether a forward to a named destination may go now: the token bucket, the forwards in
flight and the circuit breaker, as one pure decision.

The store runs it inside the transaction that holds the destination's row locked (the
rate, slots and circuit are shared by every worker process), as it runs a machine's
judgement inside a resource's transaction; the rule itself knows no database, so it is
read and tested here, in one place: circuit, then in-flight, then rate.
"""

from __future__ import annotations

from dataclasses import dataclass

from hookinbox.codes import JobCode

#: How long a job held by a full destination waits before it is claimed again.
BUSY_WAIT_SECONDS = 0.2
#: How long a job waits while another job probes a half-open circuit.
PROBE_WAIT_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class DestinationLimits:
    """What a destination allows (from ``[destinations.NAME]``); None: no such limit."""

    rate_per_second: float | None
    burst: float
    max_in_flight: int | None
    circuit_failures: int | None
    circuit_cooldown: float
    #: How long a slot (and a half-open probe) holds without a release: the forward's
    #: timeout and a margin, after which a dead worker's slot is free again.
    slot_seconds: float


@dataclass(frozen=True, slots=True)
class GateReading:
    """The destination as its locked row says it is now (database clock)."""

    #: Tokens in the bucket at the last refill.
    tokens: float
    #: Seconds since the last refill (None: never refilled).
    since_refill: float | None
    #: Seconds since the circuit opened; None while it is closed.
    open_for: float | None
    #: Another job is probing the half-open circuit right now.
    probing: bool
    #: Live slots of other jobs (counted only when ``max_in_flight`` is set).
    in_flight: int


@dataclass(frozen=True, slots=True)
class Admission:
    """``admitted``, or held with ``code`` (``destination_rate``, ``destination_busy``,
    ``circuit_open``) for about ``wait_seconds``; ``probe``: this job tests a half-open
    circuit."""

    admitted: bool
    code: str | None = None
    wait_seconds: float = 0.0
    probe: bool = False


def admit_forward(limits: DestinationLimits, now: GateReading) -> tuple[Admission, float]:
    """The admission of one job: ``(answer, tokens left in the bucket)``."""
    tokens = now.tokens
    if limits.rate_per_second is not None:
        refill = (now.since_refill or 0.0) * limits.rate_per_second
        tokens = min(limits.burst, tokens + max(0.0, refill))
    probe = False
    if now.open_for is not None and limits.circuit_failures is not None:
        left = limits.circuit_cooldown - now.open_for
        if left > 0:
            return Admission(False, JobCode.CIRCUIT_OPEN, left), tokens
        if now.probing:
            return Admission(False, JobCode.CIRCUIT_OPEN, PROBE_WAIT_SECONDS), tokens
        probe = True
    if limits.max_in_flight is not None and now.in_flight >= limits.max_in_flight:
        return Admission(False, JobCode.DESTINATION_BUSY, BUSY_WAIT_SECONDS), tokens
    if limits.rate_per_second is not None:
        if tokens < 1.0:
            wait = (1.0 - tokens) / limits.rate_per_second
            return Admission(False, JobCode.DESTINATION_RATE, wait), tokens
        tokens -= 1.0
    return Admission(True, probe=probe), tokens
