"""A route's retry policy: an explicit schedule whose length bounds the attempts, or the
exponential backoff of [worker]; statuses that go straight to the dead letters. Both
stores, against a real local HTTP target."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from hookinbox.config import Config, config_from_mapping
from hookinbox.errors import ConfigError
from hookinbox.work.retry_policy import Failure, RetryPolicy
from tests.support.inbox import make_config, running_inbox
from tests.support.signing import delivery
from tests.support.target import Answer, RecordingTarget
from tests.support.waiting import wait_for_status


def policy_config(db_url: str, url: str, **route: Any) -> Config:
    return make_config(
        db_url,
        routes=[
            {
                "events": ["*"],
                "action": "relay",
                "forward": url,
                "forward_timeout_seconds": 2,
                **route,
            }
        ],
        worker={"max_attempts": 2, "backoff_base_seconds": 0.1},
    )


async def _attempts_of(
    db_url: str,
    client: httpx.AsyncClient,
    event_id: str,
    answers: list[Answer],
    state: str,
    **route: Any,
) -> tuple[list[tuple[str, str | None]], RecordingTarget, int]:
    body, headers = delivery(event_id)
    with RecordingTarget(statuses=answers) as target:
        async with running_inbox(policy_config(db_url, target.url, **route)) as inbox:
            await client.post(inbox.url(), content=body, headers=headers)
            await wait_for_status(inbox.store, event_id, state)
            found = await inbox.store.journal.get_delivery(event_id)
            assert found is not None
            history = await inbox.store.queue.list_attempts(found.jobs[0].id)
    return [(a.outcome, a.error_code) for a in history], target, found.jobs[0].max_attempts


async def test_an_explicit_schedule_bounds_the_attempts_by_its_length(
    db_url: str, client: httpx.AsyncClient
) -> None:
    """Three waits: four attempts, though [worker] max_attempts is 2."""
    history, target, max_attempts = await _attempts_of(
        db_url,
        client,
        "evt_schedule",
        [500] * 10,
        "failed",
        retry_schedule=["0.1s", "100ms", "0.2s"],
    )
    assert history == [("retry", "http_500")] * 3 + [("failed", "http_500")]
    assert len(target.requests) == 4 and max_attempts == 4
    waits = [b - a for a, b in zip(target.arrivals, target.arrivals[1:], strict=False)]
    assert waits[2] >= 0.18  # the third wait is the schedule's 0.2s


async def test_a_status_in_dead_letter_on_goes_straight_to_the_dead_letters(
    db_url: str, client: httpx.AsyncClient
) -> None:
    history, target, _ = await _attempts_of(
        db_url, client, "evt_404", [404], "failed", dead_letter_on=[400, 404, 422]
    )
    assert history == [("failed", "http_404")]
    assert len(target.requests) == 1


async def test_a_status_not_listed_is_retried_as_before(
    db_url: str, client: httpx.AsyncClient
) -> None:
    history, _, _ = await _attempts_of(
        db_url, client, "evt_409", [409], "completed", dead_letter_on=[404]
    )
    assert history == [("retry", "http_409"), ("completed", None)]


def _route(**fields: Any) -> dict[str, Any]:
    route = {"events": ["*"], "action": "a", "forward": "http://127.0.0.1:9/x", **fields}
    return {"sources": {"s": {"secret_env": "HB_X", "routes": [route]}}}


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"retry_schedule": ["5s", "soon"]}, "retry_schedule[1]: not a duration"),
        ({"retry_schedule": "5s"}, "must be a list of durations"),
        ({"retry_schedule": []}, "must list 1 to"),
        ({"retry_schedule": ["8d"]}, "longer than a week"),
        ({"dead_letter_on": [200]}, "200 is not a 4xx or 5xx status"),
        ({"dead_letter_on": [404, 404]}, "lists a status twice"),
        ({"dead_letter_on": ["404"]}, "valid integer"),
    ],
)
def test_a_bad_retry_policy_is_one_config_error_line_naming_the_key(
    fields: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping(_route(**fields))
    assert caught.value.code == "config_error"
    assert caught.value.message.startswith("sources.s.routes.0")
    assert says in caught.value.message and "\n" not in caught.value.message


def test_dead_letter_on_is_for_forward_routes_only() -> None:
    route = {"events": ["*"], "action": "a", "handler": "m.n:f", "dead_letter_on": [404]}
    with pytest.raises(ConfigError, match="dead_letter_on applies to forward routes"):
        config_from_mapping({"sources": {"s": {"secret_env": "HB_X", "routes": [route]}}})


def test_the_schedule_gives_each_wait_in_turn_and_the_last_one_after_that() -> None:
    config = config_from_mapping(_route(retry_schedule=["5s", "1m", "10m", "1h", "6h"]))
    route = config.sources["s"].routes[0]
    policy = RetryPolicy.build(config.worker, route)
    assert policy.attempts == 6
    failure = Failure("http_500", 500)
    delays = [policy.decide(failure, attempts=n, max_attempts=6).delay for n in range(1, 6)]
    assert delays == [5, 60, 600, 3600, 21600]
    assert policy.decide(failure, attempts=6, max_attempts=6).kind == "dead_letter"
    # A deferral gave its attempt back (max_attempts grew): the schedule does not move on.
    assert policy.decide(failure, attempts=2, max_attempts=7).delay == 5


def test_without_a_schedule_the_one_exponential_backoff_applies() -> None:
    config = config_from_mapping(_route())
    policy = RetryPolicy.build(config.worker, config.sources["s"].routes[0])
    assert policy.attempts == config.worker.max_attempts
    for spent in range(1, 6):
        ceiling = min(config.worker.backoff_max_seconds, 2 ** (spent - 1))
        assert ceiling / 2 <= policy.wait_after(spent) < ceiling


def test_a_job_held_by_a_full_destination_waits_longer_each_time_up_to_a_bound() -> None:
    config = config_from_mapping(_route())
    policy = RetryPolicy.build(config.worker, config.sources["s"].routes[0])
    busy = Failure("destination_busy", held_seconds=0.2)
    first = policy.decide(busy, attempts=1, max_attempts=policy.attempts)
    later = policy.decide(busy, attempts=11, max_attempts=policy.attempts + 10)
    much_later = policy.decide(busy, attempts=99, max_attempts=policy.attempts + 98)
    assert first.kind == later.kind == "defer"
    assert 0.2 <= first.delay <= 0.25 < later.delay
    assert much_later.delay <= 5.0 * 1.25
    circuit = Failure("circuit_open", held_seconds=3.0)
    held = policy.decide(circuit, attempts=11, max_attempts=policy.attempts + 10)
    assert 3.0 <= held.delay <= 3.75  # the rest of the cool-down, not grown
