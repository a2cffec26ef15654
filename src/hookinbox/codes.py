"""The short codes hookinbox writes into the journal, the attempt history and its metrics.

One vocabulary for Python and SQL alike: the store passes these values as parameters (or
formats these constants, never input, into its statements), the worker and the relay
raise and compare them, and operators read them in ``dlq list``, ``trace`` and the admin.
A code is an id, never a message: it never quotes a payload or an exception's text.

The states and outcomes are enums here too, each meaning written once beside its values:
a job's :class:`JobState`, how a retry policy decides (:class:`RetryKind`), how a
settlement ends the job (:class:`SettleOutcome`: the state it leaves, the attempt's
:class:`AttemptOutcome`, whether the attempt is given back) and the :class:`JobCode` that
says *why* a job or an attempt ended where it did. They are ``StrEnum``: the SQL and the
stored rows hold the same strings.
"""

from __future__ import annotations

from enum import StrEnum


class JobCode(StrEnum):
    """Why an attempt failed, or why a job waits or is dead-lettered (``last_error``)."""

    #: The worker holding the lease stopped renewing it (it died or hung).
    LEASE_EXPIRED = "lease_expired"
    #: The action ran longer than ``worker.job_timeout_seconds``.
    JOB_TIMEOUT = "job_timeout"
    #: No action is configured for the job's (source, action) any more.
    UNKNOWN_ACTION = "unknown_action"
    #: The payload was purged after retention; the job cannot run again.
    PAYLOAD_PURGED = "payload_purged"
    #: The stored body is not a JSON object.
    MALFORMED_JSON = "malformed_json"
    #: The body does not match the payload type the handler declares (never retried).
    PAYLOAD_INVALID = "payload_invalid"
    #: Another live job holds the effect's key; this one waits (no attempt spent).
    EFFECT_IN_PROGRESS = "effect_in_progress"
    #: A resource event whose reference is not known yet, re-checked later.
    PARKED = "parked"
    #: Still unknown at the park deadline.
    UNKNOWN_RESOURCE = "unknown_resource"
    #: The route's machine maps no state to the event type.
    UNMAPPED_EVENT = "unmapped_event"
    #: The event carries no resource reference where the route says it is.
    MISSING_RESOURCE_REF = "missing_resource_ref"
    #: The event's resource reference is over 255 UTF-8 bytes or holds a control character.
    INVALID_RESOURCE_REF = "invalid_resource_ref"
    #: A forward or a send that got no answer in time.
    TIMEOUT = "timeout"
    #: The target refused the connection (or could not be reached).
    CONNECT_ERROR = "connect_error"
    #: The target's host name did not resolve.
    DNS_ERROR = "dns_error"
    #: Any other transport failure of a forward or a send.
    HTTP_ERROR = "http_error"
    #: A handler raised :class:`~hookinbox.work.actions.ActionError` without its own code.
    ACTION_FAILED = "action_failed"
    #: The forward's target answered 410 Gone: it will never take this event.
    GONE = "gone"
    #: The destination's rate (``rate_per_second``) is used up: held, no attempt spent.
    DESTINATION_RATE = "destination_rate"
    #: The destination has ``max_in_flight`` forwards under way: held, no attempt spent.
    DESTINATION_BUSY = "destination_busy"
    #: The destination's circuit is open: held until its cool-down, no attempt spent.
    CIRCUIT_OPEN = "circuit_open"


#: Answers a target may send with ``Retry-After`` to put a job off (not a failure).
DEFERRING_STATUSES = frozenset({429, 503})


def http_status_code(status: int) -> str:
    """The code of a non-2xx answer: ``http_503``."""
    return f"http_{status}"


class AttemptOutcome(StrEnum):
    """How one attempt ended (the ``outcome`` of an attempt row)."""

    COMPLETED = "completed"
    RETRY = "retry"
    DEFERRED = "deferred"
    FAILED = "failed"
    PARKED = "parked"
    LEASE_EXPIRED = "lease_expired"


class JobState(StrEnum):
    """Where a job is (the ``state`` of a job row)."""

    ACCEPTED = "accepted"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"


class SettleOutcome(StrEnum):
    """How a settled attempt ends its job: ``completed``; ``retry`` (back to accepted, an
    attempt spent); ``deferred`` (back to accepted, the attempt given back: the job only
    waited on something outside itself); ``failed`` (a dead letter)."""

    COMPLETED = "completed"
    RETRY = "retry"
    DEFERRED = "deferred"
    FAILED = "failed"

    @property
    def job_state(self) -> JobState:
        """The state the job is left in."""
        if self is SettleOutcome.COMPLETED:
            return JobState.COMPLETED
        return JobState.FAILED if self is SettleOutcome.FAILED else JobState.ACCEPTED

    @property
    def attempt_outcome(self) -> AttemptOutcome:
        """The outcome its attempt row records (the same word)."""
        return AttemptOutcome(self.value)

    @property
    def gives_attempt_back(self) -> bool:
        """The attempt is not counted: the job waited, it did not fail."""
        return self is SettleOutcome.DEFERRED


class RetryKind(StrEnum):
    """What a retry policy decides over a failed attempt (``work/retry_policy.py``)."""

    #: Again after a wait, the attempt spent.
    RETRY = "retry"
    #: Again after a wait, the attempt given back.
    DEFER = "defer"
    #: To the dead letters.
    DEAD_LETTER = "dead_letter"

    @property
    def settles_as(self) -> SettleOutcome:
        """The settlement the store takes for this decision."""
        if self is RetryKind.RETRY:
            return SettleOutcome.RETRY
        return SettleOutcome.DEFERRED if self is RetryKind.DEFER else SettleOutcome.FAILED


class Trigger(StrEnum):
    """What started an attempt: the delivery itself or an operator's command."""

    DELIVERY = "delivery"
    REPLAY = "replay"
    DLQ_RETRY = "dlq-retry"
    OPERATOR = "operator"


#: The worker name of an attempt made inside the receiver's own commit (inline routes).
RECEIVER = "receiver"


def error_code_of(exc: BaseException) -> str:
    """A short code for the journal: the error's own ``code`` or its class name. Never
    the message, which may quote the payload."""
    code = getattr(exc, "code", None)
    if isinstance(code, str) and code:
        return code[:100]
    return type(exc).__name__[:100]
