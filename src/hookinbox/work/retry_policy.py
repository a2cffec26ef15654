"""What a failed attempt leads to: a retry after a wait, a wait that spends no attempt,
or the dead letters. One pure decision per route, built once from its config.

- a failure the job cannot outlive (``final``), a ``410 Gone`` (code ``gone``) or a
  status in the route's ``dead_letter_on``: the dead letters now;
- ``429`` or ``503`` with ``Retry-After``: back at that time (capped at
  ``[worker] retry_after_max_seconds``) without spending an attempt, up to
  ``[worker] free_deferrals`` times per job; past those, an ordinary retry at that time;
- otherwise a retry after the route's ``retry_schedule`` wait for this attempt, or the
  one exponential backoff (:mod:`hookinbox.backoff`), while attempts are left.

The attempts already spent are counted from what the job has left
(``max_attempts - attempts``), so waits that gave their attempt back (deferrals) do not
move the schedule on.
"""

from __future__ import annotations

from dataclasses import dataclass

from hookinbox.backoff import JITTER, backoff_seconds
from hookinbox.codes import DEFERRING_STATUSES, JobCode, RetryKind, SettleOutcome
from hookinbox.config import Route, Worker
from hookinbox.errors import TargetAnswered
from hookinbox.work.destination_gate import DestinationHeld

#: The longest a job held by a full destination waits before it is claimed again.
MAX_BUSY_WAIT_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Failure:
    """What went wrong in one attempt, as far as the policy cares."""

    code: str
    #: The target's HTTP status, when it answered.
    status: int | None = None
    #: The wait it asked for (``Retry-After``), in seconds.
    retry_after_seconds: float | None = None
    #: Retrying cannot help (no action any more, the payload purged, a bad payload).
    final: bool = False
    #: The destination held the job (rate, in flight, open circuit) for this long:
    #: nothing was sent, no attempt is spent.
    held_seconds: float | None = None

    @classmethod
    def of(cls, exc: BaseException, code: str, *, final: bool = False) -> Failure:
        if isinstance(exc, TargetAnswered):
            return cls(code, exc.status, exc.retry_after_seconds, final)
        if isinstance(exc, DestinationHeld):
            return cls(code, held_seconds=exc.wait_seconds)
        return cls(code, final=final)


@dataclass(frozen=True, slots=True)
class Decision:
    """How the job is settled: ``retry`` (spends the attempt), ``defer`` (gives it back)
    or ``dead_letter``; ``delay`` seconds from the database clock."""

    kind: RetryKind
    code: str
    delay: float = 0.0

    @property
    def outcome(self) -> SettleOutcome:
        """The settlement the store takes."""
        return self.kind.settles_as


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """One route's retry policy (or the default one of ``[worker]``)."""

    #: Attempts a job starts with (schedule length + 1, or ``max_attempts``).
    attempts: int
    schedule: tuple[float, ...] | None
    backoff_base: float
    backoff_max: float
    dead_letter_on: frozenset[int]
    retry_after_max: float
    free_deferrals: int

    @classmethod
    def build(cls, worker: Worker, route: Route | None = None) -> RetryPolicy:
        return cls(
            attempts=route.attempts(worker) if route is not None else worker.max_attempts,
            schedule=route.retry_schedule if route is not None else None,
            backoff_base=worker.backoff_base_seconds,
            backoff_max=worker.backoff_max_seconds,
            dead_letter_on=frozenset(route.dead_letter_on if route is not None else ()),
            retry_after_max=worker.retry_after_max_seconds,
            free_deferrals=worker.free_deferrals,
        )

    def asks_to_wait(self, failure: Failure) -> bool:
        """The target asked for a wait (429/503 with ``Retry-After``): the caller counts
        the job's deferrals so far before calling :meth:`decide`."""
        return failure.status in DEFERRING_STATUSES and failure.retry_after_seconds is not None

    def decide(
        self, failure: Failure, *, attempts: int, max_attempts: int, deferrals: int = 0
    ) -> Decision:
        """``attempts``/``max_attempts`` as the claimed job holds them (this attempt
        counted); ``deferrals``: waits asked by the target that spent no attempt so far."""
        if failure.final:
            return Decision(RetryKind.DEAD_LETTER, failure.code)
        if failure.held_seconds is not None:
            return Decision(RetryKind.DEFER, failure.code, self.hold(failure, max_attempts))
        if failure.status == 410:
            return Decision(RetryKind.DEAD_LETTER, JobCode.GONE)
        if failure.status is not None and failure.status in self.dead_letter_on:
            return Decision(RetryKind.DEAD_LETTER, failure.code)
        asked: float | None = None
        if self.asks_to_wait(failure):
            asked = min(float(failure.retry_after_seconds or 0.0), self.retry_after_max)
            if deferrals < self.free_deferrals:
                return Decision(RetryKind.DEFER, failure.code, asked)
        left = max_attempts - attempts
        if left <= 0:
            return Decision(RetryKind.DEAD_LETTER, failure.code)
        if asked is not None:
            return Decision(RetryKind.RETRY, failure.code, asked)
        return Decision(RetryKind.RETRY, failure.code, self.wait_after(self.attempts - left))

    def hold(self, failure: Failure, max_attempts: int) -> float:
        """How long a job held by its destination waits. A full destination's short wait
        grows with the job's waits so far (its attempts given back), so a long backlog is
        not claimed again five times a second; a little jitter spreads jobs held together."""
        wait = float(failure.held_seconds or 0.0)
        if failure.code == JobCode.DESTINATION_BUSY:
            given_back = max(0, max_attempts - self.attempts)
            wait = min(MAX_BUSY_WAIT_SECONDS, wait * 1.25 ** min(given_back, 30))
        return wait * (1 + JITTER.random() / 4)

    def wait_after(self, spent: int) -> float:
        """The wait after the ``spent``-th failed attempt (1 = the first)."""
        spent = max(1, spent)
        if self.schedule is not None:
            return self.schedule[min(spent, len(self.schedule)) - 1]
        return backoff_seconds(spent, base=self.backoff_base, cap=self.backoff_max, rng=JITTER)
