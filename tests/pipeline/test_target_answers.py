"""What a forward makes of its target's answer: 429 and 503 with Retry-After put the job
off to that time (capped) without spending an attempt, up to a bound per job; 410 Gone
ends it as a dead letter ``gone``. Both stores, against a real local HTTP target."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx

from hookinbox.outbound import retry_after_seconds, snippet
from tests.support.inbox import make_config, running_inbox
from tests.support.signing import delivery
from tests.support.target import Answer, RecordingTarget
from tests.support.waiting import wait_for_status


async def _run(
    db_url: str,
    client: httpx.AsyncClient,
    event_id: str,
    answers: list[Answer],
    state: str,
    **worker: Any,
) -> tuple[list[tuple[str, str | None]], RecordingTarget, int]:
    body, headers = delivery(event_id)
    route = {"events": ["*"], "action": "relay", "forward_timeout_seconds": 2}
    with RecordingTarget(statuses=answers) as target:
        config = make_config(
            db_url,
            routes=[{**route, "forward": target.url}],
            worker={"max_attempts": 2, "backoff_base_seconds": 0.1, **worker},
        )
        async with running_inbox(config) as inbox:
            await client.post(inbox.url(), content=body, headers=headers)
            await wait_for_status(inbox.store, event_id, state)
            found = await inbox.store.journal.get_delivery(event_id)
            assert found is not None
            history = await inbox.store.queue.list_attempts(found.jobs[0].id)
    return [(a.outcome, a.error_code) for a in history], target, found.jobs[0].attempts


def _gaps(target: RecordingTarget) -> list[float]:
    return [b - a for a, b in zip(target.arrivals, target.arrivals[1:], strict=False)]


async def test_a_429_with_retry_after_reschedules_without_spending_the_budget(
    db_url: str, client: httpx.AsyncClient
) -> None:
    """Three 429s and a 200 with max_attempts = 2: no attempt was spent on the waits."""
    slow_down = (429, {"retry-after": "1"}, b"slow down")
    history, target, _ = await _run(db_url, client, "evt_429", [slow_down] * 3, "completed")
    assert history == [("deferred", "http_429")] * 3 + [("completed", None)]
    assert all(gap >= 0.9 for gap in _gaps(target))  # it came back when asked, not sooner


async def test_a_503_with_an_http_date_comes_back_at_that_date(
    db_url: str, client: httpx.AsyncClient
) -> None:
    due = (datetime.now(UTC) + timedelta(seconds=3)).replace(microsecond=0)
    # The date on the monotonic clock the target stamps arrivals with.
    due_monotonic = time.monotonic() + (due.timestamp() - time.time())
    when = format_datetime(due, usegmt=True)
    history, target, _ = await _run(
        db_url, client, "evt_503_date", [(503, {"retry-after": when}, b"")], "completed"
    )
    assert history == [("deferred", "http_503"), ("completed", None)]
    # Not sooner than the date, however long the first attempt took to come (a loaded
    # machine once took over 2 of the 3 seconds before the first answer).
    assert target.arrivals[1] >= due_monotonic - 0.05


async def test_a_retry_after_longer_than_the_bound_is_capped(
    db_url: str, client: httpx.AsyncClient
) -> None:
    history, target, _ = await _run(
        db_url,
        client,
        "evt_capped",
        [(429, {"retry-after": "3600"}, b"")],
        "completed",
        retry_after_max_seconds=0.5,
    )
    assert history == [("deferred", "http_429"), ("completed", None)]
    assert _gaps(target)[0] < 10


async def test_past_the_free_deferrals_a_wait_spends_an_attempt(
    db_url: str, client: httpx.AsyncClient
) -> None:
    slow_down = (429, {"retry-after": "0"}, b"")
    history, _, attempts = await _run(
        db_url, client, "evt_bounded", [slow_down] * 10, "failed", free_deferrals=1
    )
    # One free wait, then the two attempts of max_attempts = 2 are spent.
    assert history == [
        ("deferred", "http_429"),
        ("retry", "http_429"),
        ("failed", "http_429"),
    ]
    assert attempts == 3


async def test_a_429_without_retry_after_is_an_ordinary_failed_attempt(
    db_url: str, client: httpx.AsyncClient
) -> None:
    history, _, _ = await _run(db_url, client, "evt_429_plain", [429], "completed")
    assert history == [("retry", "http_429"), ("completed", None)]


async def test_a_410_gone_ends_the_job_as_a_dead_letter_gone(
    db_url: str, client: httpx.AsyncClient
) -> None:
    history, target, _ = await _run(db_url, client, "evt_gone", [410], "failed")
    assert history == [("failed", "gone")]
    assert len(target.requests) == 1


def test_retry_after_reads_seconds_and_http_dates_and_ignores_the_rest() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert retry_after_seconds("120", now=now) == 120
    assert retry_after_seconds(" 7 ", now=now) == 7
    assert retry_after_seconds("Tue, 01 Dec 2026 12:01:30 GMT", now=now) == 90
    assert retry_after_seconds("Tue, 01 Dec 2026 11:00:00 GMT", now=now) == 0
    for unreadable in (None, "", "soon", "-5", "1.5", "Tue, 99 Foo 2026"):
        assert retry_after_seconds(unreadable, now=now) is None


def test_a_snippet_is_bounded_and_holds_no_control_characters() -> None:
    assert snippet(b'{"error":\n\t"bad"}\x00\x1b[31m') == '{"error": "bad"} [31m'
    long = snippet("é".encode() * 1000)
    assert len(long.encode()) <= 512 and set(long) == {"é"}
