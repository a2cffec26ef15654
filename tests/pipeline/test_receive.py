"""Receiving: authenticate, reserve once, answer fast. Every test runs on both stores."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from hookinbox.config import Config
from tests.support import handlers
from tests.support.inbox import make_config, running_inbox
from tests.support.signing import OLD_SECRET, SECRET, SECRET_ENV, WRONG_SECRET, delivery, signed
from tests.support.waiting import wait_for, wait_for_status

TWO_ROUTES = [
    {"events": ["crm.*"], "action": "count", "handler": "tests.support.handlers:count"},
    {
        "events": ["crm.lead.created"],
        "action": "sync",
        "handler": "tests.support.handlers:count_sync",
    },
    {"events": ["billing.*"], "action": "never", "handler": "tests.support.handlers:always_fails"},
]


async def test_concurrent_duplicates_create_one_job_per_route_and_one_run(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = make_config(db_url, routes=TWO_ROUTES)
    body, headers = delivery("evt_concurrent_50")
    async with running_inbox(config) as inbox:
        # 50 real connections, all in flight at once.
        answers = await asyncio.gather(
            *(client.post(inbox.url(), content=body, headers=headers) for _ in range(50))
        )
        assert {a.status_code for a in answers} == {200}
        outcomes = [a.json()["status"] for a in answers]
        assert outcomes.count("accepted") == 1
        assert outcomes.count("duplicate") == 49
        assert len({a.json()["delivery_id"] for a in answers}) == 1

        await wait_for_status(inbox.store, "evt_concurrent_50", "completed", 15)
        found = await inbox.store.journal.get_delivery("evt_concurrent_50")
        assert found is not None
        assert found.delivery_count == 50
        assert sorted(job.action for job in found.jobs) == ["count", "sync"]
        counts = await inbox.store.count_rows()
        assert counts["deliveries"] == 1
        assert counts["jobs"] == 2
        await asyncio.sleep(0.5)  # a second run would have had time to happen
    assert handlers.CALLS["evt_concurrent_50"] == 1
    assert handlers.CALLS["sync:evt_concurrent_50"] == 1


@pytest.mark.parametrize(
    "breakage",
    ["tampered_body", "old_timestamp", "future_timestamp", "wrong_secret", "no_signature"],
)
async def test_bad_deliveries_are_refused_and_leave_nothing(
    db_url: str, client: httpx.AsyncClient, breakage: str
) -> None:
    config = make_config(db_url)
    body, headers = delivery("evt_bad")
    expected = "invalid_signature"
    if breakage == "tampered_body":
        body = body.replace(b"crm.lead.created", b"crm.lead.deleted")
    elif breakage == "old_timestamp":
        body, headers = delivery("evt_bad", timestamp=time.time() - 330)
        expected = "timestamp_out_of_tolerance"
    elif breakage == "future_timestamp":
        body, headers = delivery("evt_bad", timestamp=time.time() + 330)
        expected = "timestamp_out_of_tolerance"
    elif breakage == "wrong_secret":
        body, headers = delivery("evt_bad", secret=WRONG_SECRET)
    elif breakage == "no_signature":
        del headers["webhook-signature"]
        expected = "missing_headers"
    async with running_inbox(config) as inbox:
        answer = await client.post(inbox.url(), content=body, headers=headers)
        assert answer.status_code == 400
        assert answer.json() == {"error": expected}
        counts = await inbox.store.count_rows()
    assert counts["deliveries"] == counts["jobs"] == counts["payloads"] == 0
    assert handlers.CALLS == {}


async def test_a_delivery_signed_with_the_older_of_two_secrets_is_accepted(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, f"{SECRET} {OLD_SECRET}")
    config = make_config(db_url)
    body, headers = delivery("evt_rotated", secret=OLD_SECRET)
    async with running_inbox(config) as inbox:
        answer = await client.post(inbox.url(), content=body, headers=headers)
    assert answer.status_code == 200
    assert answer.json()["status"] == "accepted"


@pytest.mark.parametrize(
    ("body", "code"),
    [(b"not json", "malformed_json"), (b"[1, 2]", "malformed_json")],
)
async def test_a_signed_body_that_is_not_a_json_object_is_refused(
    db_url: str, client: httpx.AsyncClient, body: bytes, code: str
) -> None:
    config = make_config(db_url)
    body, headers = signed(body, event_id="evt_not_json")
    async with running_inbox(config) as inbox:
        answer = await client.post(inbox.url(), content=body, headers=headers)
        counts = await inbox.store.count_rows()
    assert (answer.status_code, answer.json()) == (400, {"error": code})
    assert counts["deliveries"] == 0


async def test_missing_event_id_unknown_source_and_oversized_body(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = make_config(db_url, source={"max_body_bytes": 1024})
    async with running_inbox(config) as inbox:
        body, headers = delivery("evt_x")
        del headers["webhook-id"]
        answer = await client.post(inbox.url(), content=body, headers=headers)
        assert (answer.status_code, answer.json()) == (400, {"error": "missing_event_id"})

        answer = await client.post(inbox.url("nope"), content=body, headers=headers)
        assert answer.status_code == 404

        big, headers = delivery("evt_big", filler="x" * 5000)
        answer = await client.post(inbox.url(), content=big, headers=headers)
        assert answer.status_code == 413

        async def chunks():  # no content-length: the limit holds on the stream itself
            for _ in range(10):
                yield b"x" * 512

        answer = await client.post(inbox.url(), content=chunks(), headers=headers)
        assert answer.status_code == 413
        assert (await inbox.store.count_rows())["deliveries"] == 0


async def test_the_2xx_comes_back_while_a_slow_handler_still_runs(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = make_config(
        db_url,
        routes=[{"events": ["*"], "action": "slow", "handler": "tests.support.handlers:slow"}],
    )
    body, headers = delivery("evt_slow")
    async with running_inbox(config) as inbox:
        started = time.monotonic()
        answer = await client.post(inbox.url(), content=body, headers=headers)
        elapsed = time.monotonic() - started
        assert answer.status_code == 200
        assert elapsed < 2.0  # the handler sleeps 2 s: an answer that waited for it could not
        await wait_for(lambda: _async(handlers.CALLS["evt_slow"] == 1), 5, "the handler to start")
        assert "evt_slow" not in handlers.FINISHED  # it is still sleeping: the answer did not wait
        await wait_for(lambda: _async("evt_slow" in handlers.FINISHED), 10, "the handler to end")


async def _async(value: bool) -> bool:
    return value


async def test_a_repeat_with_a_different_body_is_a_counted_conflict_not_a_new_job(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = make_config(db_url)
    async with running_inbox(config) as inbox:
        first = await client.post(
            inbox.url(), content=(d := delivery("evt_c", n=1))[0], headers=d[1]
        )
        second = await client.post(
            inbox.url(), content=(d := delivery("evt_c", n=2))[0], headers=d[1]
        )
        assert first.json()["status"] == "accepted"
        assert second.json() == {
            "status": "duplicate",
            "delivery_id": first.json()["delivery_id"],
            "conflict": True,
        }
        found = await inbox.store.journal.get_delivery("evt_c")
        assert found is not None
        assert (found.delivery_count, found.conflicts, len(found.jobs)) == (2, 1, 1)


async def test_concurrent_deliveries_of_one_event_in_other_bodies_are_each_answered(
    db_url: str, client: httpx.AsyncClient
) -> None:
    """A provider resending one event id with changed bodies, all at once: each is a
    counted conflict, none a 503 (PostgreSQL's batch statement answers one delivery per
    event, so the others of a batch go in the next statement)."""
    config = make_config(db_url)
    async with running_inbox(config) as inbox:
        first = await client.post(
            inbox.url(), content=(d := delivery("evt_many", n=0))[0], headers=d[1]
        )
        assert first.json()["status"] == "accepted"
        variants = [delivery("evt_many", n=k) for k in range(1, 21)]
        answers = await asyncio.gather(
            *(client.post(inbox.url(), content=body, headers=headers) for body, headers in variants)
        )
        assert [a.status_code for a in answers] == [200] * 20
        assert {(a.json()["status"], a.json()["conflict"]) for a in answers} == {
            ("duplicate", True)
        }
        found = await inbox.store.journal.get_delivery("evt_many")
        assert found is not None
        assert (found.delivery_count, found.conflicts, len(found.jobs)) == (21, 20, 1)


async def test_readyz_and_healthz(db_url: str, client: httpx.AsyncClient) -> None:
    async with running_inbox(make_config(db_url)) as inbox:
        assert (await client.get(f"{inbox.base_url}/healthz")).status_code == 200
        ready = await client.get(f"{inbox.base_url}/readyz")
        assert (ready.status_code, ready.json()) == (200, {"status": "ready"})


def test_config_builder_gives_a_valid_config(db_url: str) -> None:
    assert isinstance(make_config(db_url), Config)
