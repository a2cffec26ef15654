"""One vocabulary: the states and outcomes are the enums of ``codes.py``, and a retry
policy's decision names the settlement the store takes, with no map in between."""

from __future__ import annotations

from hookinbox.codes import AttemptOutcome, JobState, RetryKind, SettleOutcome
from hookinbox.config import Worker
from hookinbox.store import JOB_STATES
from hookinbox.store import JobState as StoreJobState
from hookinbox.store import SettleOutcome as StoreSettleOutcome
from hookinbox.work.retry_policy import Failure, RetryPolicy


def test_the_store_speaks_the_enums_of_codes_with_the_stored_strings() -> None:
    assert StoreJobState is JobState and StoreSettleOutcome is SettleOutcome
    assert JOB_STATES == ("accepted", "processing", "completed", "failed")
    assert [outcome.value for outcome in SettleOutcome] == [
        "completed",
        "retry",
        "deferred",
        "failed",
    ]


def test_each_settle_outcome_carries_the_state_and_the_attempt_outcome_it_writes() -> None:
    written = {
        outcome: (outcome.job_state, outcome.attempt_outcome, outcome.gives_attempt_back)
        for outcome in SettleOutcome
    }
    assert written == {
        SettleOutcome.COMPLETED: (JobState.COMPLETED, AttemptOutcome.COMPLETED, False),
        SettleOutcome.RETRY: (JobState.ACCEPTED, AttemptOutcome.RETRY, False),
        SettleOutcome.DEFERRED: (JobState.ACCEPTED, AttemptOutcome.DEFERRED, True),
        SettleOutcome.FAILED: (JobState.FAILED, AttemptOutcome.FAILED, False),
    }


def test_a_retry_decision_is_the_settlement_the_store_takes() -> None:
    policy = RetryPolicy.build(Worker(max_attempts=3))
    retried = policy.decide(Failure("http_500", 500), attempts=1, max_attempts=3)
    deferred = policy.decide(
        Failure("http_429", 429, retry_after_seconds=2), attempts=1, max_attempts=3
    )
    dead = policy.decide(Failure("http_500", 500), attempts=3, max_attempts=3)
    assert [d.kind for d in (retried, deferred, dead)] == list(RetryKind)
    assert [d.outcome for d in (retried, deferred, dead)] == [
        SettleOutcome.RETRY,
        SettleOutcome.DEFERRED,
        SettleOutcome.FAILED,
    ]
