"""Ordered routes (``order_key``) through the real receiver and worker pool, on both stores:
jobs of one key run one at a time in reservation order, other keys in parallel; a failing
head holds its key without costing the waiting jobs an attempt; ``on_dead_letter = "hold"``
keeps the key held after a dead letter, reconcile reports it, the CLI's trace says what a
job waits behind. The multi-process run on PostgreSQL is tests/e2e/test_ordered_workers.py."""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import structlog
from asyncpg.transaction import Transaction

from hookinbox import ops
from hookinbox.app import standard_operator_views
from hookinbox.config import Config, config_from_mapping
from hookinbox.errors import ConfigError
from hookinbox.store import Store, hot_path_postgres
from hookinbox.store import core as store_core
from hookinbox.store.sql import Sql
from tests.resources.support import video_event, video_route
from tests.support import handlers
from tests.support.configs import write_config
from tests.support.database import pg_schema_url, pg_session
from tests.support.inbox import make_config, running_inbox
from tests.support.ordering import assert_in_reservation_order
from tests.support.processes import run_hookinbox
from tests.support.signing import event_body, signed
from tests.support.waiting import wait_for, wait_for_status

VIEWS = standard_operator_views()
ORDERED_ROUTE = {
    "events": ["*"],
    "action": "apply",
    "handler": "tests.support.handlers:ordered",
    "order_key": "/data/customer",
}
#: For events sent one after another (each reservation commits before the next id is made),
#: where a short grace changes nothing but the test's time.
FAST = {"concurrency": 6, "order_grace_seconds": 0.1, "poll_interval_seconds": 0.1}
#: For events sent concurrently: reservations commit out of id order (several batches on
#: their way at once), and the grace must outlast a commit on a loaded machine, as a
#: deployment's must; the default (1 s), not a shorter one that holds only on a quiet one.
CONCURRENT = {"concurrency": 6, "poll_interval_seconds": 0.1}


async def _send(client: httpx.AsyncClient, url: str, event_id: str, customer: str) -> None:
    body, headers = signed(event_body(event_id, customer=customer), event_id=event_id)
    answer = await client.post(url, content=body, headers=headers)
    assert answer.status_code == 200 and answer.json()["status"] == "accepted", answer.text


async def _job(store: Store, event_id: str) -> Any:
    delivery = await store.journal.get_delivery(event_id)
    assert delivery is not None
    (job,) = delivery.jobs
    return job


async def test_jobs_of_one_key_run_one_at_a_time_in_reservation_order_and_keys_in_parallel(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = make_config(db_url, routes=[ORDERED_ROUTE], worker=CONCURRENT)
    keys = [f"cus_{n}" for n in range(6)]
    events = [(f"evt_{key}_{n}", key) for key in keys for n in range(8)]
    random.Random(5).shuffle(events)
    async with running_inbox(config) as inbox:
        lanes = [events[n::8] for n in range(8)]

        async def lane(items: list[tuple[str, str]]) -> None:
            for event_id, key in items:
                await _send(client, inbox.url(), event_id, key)

        await asyncio.gather(*(lane(items) for items in lanes))
        await wait_for(lambda: _settled(len(events)), 30, "every ordered job ran")
        expected: dict[str, list[str]] = collections.defaultdict(list)
        for event_id, key in events:
            expected[key].append((await _job(inbox.store, event_id)).id.split(":")[0])
            assert (await _job(inbox.store, event_id)).attempts == 1
    assert_in_reservation_order(handlers.ORDERED, expected)
    # Other keys did run at the same time: the route is not one queue.
    spans = sorted((start, end) for _, _, start, end, _ in handlers.ORDERED)
    assert any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))


async def _settled(count: int) -> bool:
    return len(handlers.ORDERED) >= count


@pytest.fixture
def pg_url() -> Iterator[str]:
    with pg_schema_url() as url:
        yield url


async def _hold_row_of(blocker: asyncpg.Connection, event_id: str) -> Transaction:
    """A transaction of ``blocker`` holding the journal row the reservation of
    ``event_id`` must insert: that reservation waits on its lock until the rollback."""
    holding = blocker.transaction()
    await holding.start()
    await blocker.execute(
        "INSERT INTO deliveries (id, source, event_id, event_type, body_sha256)"
        " VALUES ('dlv_0', 'test', $1, 'held', 'x')",
        event_id,
    )
    return holding


async def _waits_on_lock_of(blocker: asyncpg.Connection) -> bool:
    return bool(
        await blocker.fetchval(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))"
        )
    )


async def _first_reservation_held(
    blocker: asyncpg.Connection, client: httpx.AsyncClient, url: str
) -> tuple[Transaction, asyncio.Task[None]]:
    """``evt_first`` (key ``cus_1``) sent, its reservation waiting on the row ``blocker``
    holds until the returned transaction's rollback."""
    holding = await _hold_row_of(blocker, "evt_first")
    first = asyncio.create_task(_send(client, url, "evt_first", "cus_1"))
    await wait_for(lambda: _waits_on_lock_of(blocker), 10, "the first reservation to wait")
    return holding, first


async def _send_unkeyed(client: httpx.AsyncClient, url: str, event_id: str) -> None:
    """An event without the order key: its job runs unordered, its batch waits for none."""
    body, headers = signed(event_body(event_id), event_id=event_id)
    answer = await asyncio.wait_for(client.post(url, content=body, headers=headers), 10)
    assert answer.json()["status"] == "accepted", answer.text


@pytest.fixture
def held_reservations_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reservation waits on a lock for as long as the test holds it, not the store's
    5 s timeout, which a loaded machine could use up between the test's steps."""
    monkeypatch.setattr(hot_path_postgres, "RESERVE_TIMEOUT", 60.0)


@pytest.mark.usefixtures("held_reservations_wait")
async def test_a_stalled_ordered_reservation_commits_before_the_later_one_of_its_receiver(
    pg_url: str, client: httpx.AsyncClient
) -> None:
    # PostgreSQL, where a receiver has several batches on their way at once (SQLite
    # writes one at a time). The first event's row is locked by another transaction,
    # far longer than the 0.1 s grace: the second event of its key must neither commit
    # nor run before it, while an unordered event goes through.
    config = make_config(pg_url, routes=[ORDERED_ROUTE], worker=FAST)
    async with running_inbox(config) as inbox, pg_session(pg_url) as blocker:
        holding, first = await _first_reservation_held(blocker, client, inbox.url())
        second = asyncio.create_task(_send(client, inbox.url(), "evt_second", "cus_1"))
        await _send_unkeyed(client, inbox.url(), "evt_unkeyed")  # answered while the first waits
        # Ten graces long, and the second is still not answered: it waits its turn.
        done, _ = await asyncio.wait({second}, timeout=1.0)
        assert not done and not handlers.ORDERED
        await holding.rollback()
        await asyncio.gather(first, second)
        await wait_for(lambda: _settled(2), 10, "both ordered jobs ran")
        ids = [(await _job(inbox.store, e)).id.split(":")[0] for e in ("evt_first", "evt_second")]
    assert ids[0] < ids[1]
    assert [call[1] for call in handlers.ORDERED] == ids


@pytest.mark.usefixtures("held_reservations_wait")
async def test_a_stalled_ordered_reservation_holds_one_batch_slot_and_the_rest_keep_going(
    pg_url: str, client: httpx.AsyncClient
) -> None:
    # A receiver on PostgreSQL has four batches on their way at most. While the first
    # ordered reservation waits on a lock, five more ordered events (other keys) come one
    # by one: they wait for its turn in the queue, gathering, and take no slot, so the
    # unordered event sent after each of them is answered all along.
    config = make_config(pg_url, routes=[ORDERED_ROUTE], worker=FAST)
    async with running_inbox(config) as inbox, pg_session(pg_url) as blocker:
        holding, first = await _first_reservation_held(blocker, client, inbox.url())
        behind = []
        for n in range(2, 7):
            behind.append(
                asyncio.create_task(_send(client, inbox.url(), f"evt_key_{n}", f"cus_{n}"))
            )
            await _send_unkeyed(client, inbox.url(), f"evt_unkeyed_{n}")
        assert not first.done() and not any(task.done() for task in behind)
        assert not handlers.ORDERED
        await holding.rollback()
        await asyncio.gather(first, *behind)
        await wait_for(lambda: _settled(6), 10, "every ordered job ran")
        first_id = (await _job(inbox.store, "evt_first")).id.split(":")[0]
        later = [(await _job(inbox.store, f"evt_key_{n}")).id for n in range(2, 7)]
    assert all(first_id < job_id for job_id in later)


@pytest.mark.usefixtures("held_reservations_wait")
async def test_deliveries_gather_behind_the_commit_on_its_way_and_leave_as_one_batch(
    pg_url: str, client: httpx.AsyncClient
) -> None:
    # A second batch may leave only once the first has been out for a minute: the five
    # events sent while the first commit waits on a lock wait with it, then commit
    # together (the default, a few milliseconds, is the stalled case of the test above).
    config = make_config(
        pg_url, routes=[ORDERED_ROUTE], worker=FAST, server={"batch_overlap_ms": 60_000}
    )
    async with running_inbox(config) as inbox, pg_session(pg_url) as blocker:
        holding, first = await _first_reservation_held(blocker, client, inbox.url())
        behind = [
            asyncio.create_task(_send_unkeyed(client, inbox.url(), f"evt_unkeyed_{n}"))
            for n in range(5)
        ]
        batcher = inbox.inbox.receiver.batcher

        async def five_waiting() -> bool:
            return batcher.waiting == 5

        await wait_for(five_waiting, 10, "five deliveries behind the first")
        assert not any(task.done() for task in behind)
        await holding.rollback()
        await asyncio.gather(first, *behind)
        metrics = (await client.get(f"{inbox.base_url}/metrics")).text
    assert "hookinbox_reserve_batch_size_count 2.0" in metrics
    assert "hookinbox_reserve_batch_size_sum 6.0" in metrics


@pytest.mark.usefixtures("held_reservations_wait")
async def test_an_inline_resource_reservation_with_an_ordered_job_takes_its_turn(
    pg_url: str, client: httpx.AsyncClient
) -> None:
    # One event that a resource route applies in the receiver's commit (inline) and an
    # ordered route takes too: its commit is its own, not a batch's, and still waits for
    # the earlier ordered reservation of its receiver.
    routes = [ORDERED_ROUTE, video_route(inline=True)]
    config = make_config(pg_url, routes=routes, worker=FAST)
    async with running_inbox(config) as inbox, pg_session(pg_url) as blocker:
        video = await inbox.inbox.resources.create(
            "video", tenant="acme", owner="user-1", provider_ref="prov-1"
        )
        holding, first = await _first_reservation_held(blocker, client, inbox.url())
        body, headers = video_event("evt_video", "ready", "prov-1", customer="cus_1")
        second = asyncio.create_task(client.post(inbox.url(), content=body, headers=headers))
        await _send_unkeyed(client, inbox.url(), "evt_unkeyed")
        done, _ = await asyncio.wait({second}, timeout=1.0)
        assert not done and not handlers.ORDERED
        await holding.rollback()
        await first
        assert (await second).json()["status"] == "accepted"
        await wait_for(lambda: _settled(2), 10, "both ordered jobs ran")
        ids = [(await _job(inbox.store, "evt_first")).id.split(":")[0]]
        found = await inbox.store.journal.get_delivery("evt_video")
        applied = await inbox.store.resources.get_resource(video.id)
    assert found is not None
    ids.append(found.id)
    assert ids[0] < ids[1]
    assert [call[1] for call in handlers.ORDERED] == ids
    assert applied is not None and applied.state == "ready"


def _gathering(db_url: str, *, grace: float) -> Config:
    """An ordered route whose receiver's batches gather for 100 ms, against ``grace``."""
    return make_config(
        db_url,
        routes=[ORDERED_ROUTE],
        worker={**FAST, "order_grace_seconds": grace},
        server={"batch_wait_ms": 100},
    )


async def test_an_ordered_reservation_committed_after_the_grace_is_logged_and_counted(
    db_url: str, client: httpx.AsyncClient
) -> None:
    # Batches that gather for 100 ms commit every reservation later than a 50 ms grace:
    # a later job of its key could have run first, and the operator must be able to see it.
    async with running_inbox(_gathering(db_url, grace=0.05)) as inbox:
        with structlog.testing.capture_logs() as lines:
            await _send(client, inbox.url(), "evt_keyed", "cus_1")
            # No key in the body: the job runs unordered, and no grace applies to it.
            await _send_unkeyed(client, inbox.url(), "evt_unkeyed")
        metrics = (await client.get(f"{inbox.base_url}/metrics")).text
        keyed = (await inbox.store.journal.get_delivery("evt_keyed")).id  # type: ignore[union-attr]
    (late,) = [line for line in lines if line["event"] == "ordered_reservation_late"]
    assert late["delivery_id"] == keyed and late["source"] == "test"
    assert late["seconds"] >= 0.1 and late["order_grace_seconds"] == 0.05
    assert late["log_level"] == "warning"
    assert 'hookinbox_ordered_reservations_late_total{source="test"} 1.0' in metrics


async def test_an_ordered_reservation_committed_within_the_grace_is_not_reported(
    db_url: str, client: httpx.AsyncClient
) -> None:
    # The same 100 ms batches against a grace of 5 s: in time, so nothing is logged.
    async with running_inbox(_gathering(db_url, grace=5)) as inbox:
        with structlog.testing.capture_logs() as lines:
            await _send(client, inbox.url(), "evt_keyed", "cus_1")
        metrics = (await client.get(f"{inbox.base_url}/metrics")).text
    assert [line for line in lines if line["event"] == "receipt"]
    assert not [line for line in lines if line["event"] == "ordered_reservation_late"]
    assert "hookinbox_ordered_reservations_late_total{" not in metrics


async def test_a_host_clock_off_the_stores_by_a_quarter_of_the_grace_is_warned_at_start(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ids come from the receivers' clocks and the claim's horizon from the workers': a
    # host 0.5 s behind the store, against a 1 s grace, is said at start, with the offset.
    ordered = make_config(db_url, routes=[ORDERED_ROUTE], worker=CONCURRENT)
    with structlog.testing.capture_logs() as in_time:
        async with running_inbox(ordered):
            pass
    monkeypatch.setattr(store_core, "host_clock", lambda: time.time() - 0.5)
    with structlog.testing.capture_logs() as behind:
        async with running_inbox(ordered):
            pass
    # Without an ordered route no clock is compared.
    unordered = make_config(db_url, routes=[{**ORDERED_ROUTE, "order_key": None}])
    with structlog.testing.capture_logs() as unkeyed:
        async with running_inbox(unordered):
            pass
    assert not [line for line in in_time + unkeyed if line["event"] == "clock_offset"]
    (warned,) = [line for line in behind if line["event"] == "clock_offset"]
    assert 0.4 < warned["seconds"] < 0.6 and warned["order_grace_seconds"] == 1
    assert warned["log_level"] == "warning"


async def test_a_failing_head_holds_its_key_and_the_job_behind_it_spends_no_attempt(
    db_url: str, client: httpx.AsyncClient
) -> None:
    # The head is retried for 4 s: longer than the sends and reads below take on a loaded
    # machine, so the job behind it is seen waiting before the head is dead-lettered.
    route = {**ORDERED_ROUTE, "retry_schedule": ["2s", "2s"]}
    config = make_config(db_url, routes=[route], worker=FAST)
    handlers.FAIL_ORDERED.add("evt_head")
    async with running_inbox(config) as inbox:
        await _send(client, inbox.url(), "evt_head", "cus_1")
        await wait_for(lambda: _attempted(inbox.store, "evt_head"), 10, "the head's first attempt")
        await _send(client, inbox.url(), "evt_next", "cus_1")
        await _send(client, inbox.url(), "evt_other_key", "cus_2")
        await wait_for_status(inbox.store, "evt_other_key", "completed")
        # While the head retries, the job behind it is never claimed.
        waiting = await _job(inbox.store, "evt_next")
        assert (waiting.state, waiting.attempts) == ("accepted", 0)
        report = await ops.trace(inbox.store, config, "evt_next", layers=VIEWS.trace_layers)
        behind = report.as_json()["deliveries"][0]["jobs"][0]["waiting_behind"]
        head = await _job(inbox.store, "evt_head")
        assert behind["job_id"] == head.id and behind["ahead"] == 1
        # Dead-lettered (on_dead_letter = "release", the default): the next one runs.
        await wait_for_status(inbox.store, "evt_head", "failed")
        await wait_for_status(inbox.store, "evt_next", "completed")
        assert (await _job(inbox.store, "evt_next")).attempts == 1
        assert (await _job(inbox.store, "evt_head")).attempts == 3


async def _attempted(store: Store, event_id: str) -> bool:
    return (await _job(store, event_id)).attempts >= 1


async def test_a_held_key_stays_held_after_its_dead_letter_until_the_operator_retries_it(
    db_url: str, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    route = {**ORDERED_ROUTE, "retry_schedule": ["0.2s"], "on_dead_letter": "hold"}
    config = make_config(db_url, routes=[route], worker=FAST)
    handlers.FAIL_ORDERED.add("evt_head")
    async with running_inbox(config) as inbox:
        await _send(client, inbox.url(), "evt_head", "cus_1")
        await _send(client, inbox.url(), "evt_next", "cus_1")
        await wait_for_status(inbox.store, "evt_head", "failed")
        head = await _job(inbox.store, "evt_head")
        # Other keys are not held, and the waiting job is still not claimed.
        await _send(client, inbox.url(), "evt_other_key", "cus_2")
        await wait_for_status(inbox.store, "evt_other_key", "completed")
        waiting = await _job(inbox.store, "evt_next")
        assert (waiting.state, waiting.attempts) == ("accepted", 0)

        report = await ops.reconcile(inbox.store, config, checks=VIEWS.checks)
        (held,) = [f for f in report.findings if f.check == "held_keys"]
        assert held.count == 1 and held.items[0]["id"] == head.id
        assert held.items[0]["detail"].endswith("1 waiting")
        (dead,) = (await ops.dlq_list(inbox.store, config)).jobs
        assert dead.as_json()["holds_key"] is True

        # The CLI, as an operator runs it.
        cli_config = write_config(tmp_path / "hookinbox.toml", db_url, routes=[route])
        traced = run_hookinbox(cli_config, "trace", "evt_next")
        assert traced.returncode == 0, traced.stderr
        assert f"waiting behind {head.id.split(':')[0]}" in traced.stdout
        checked = run_hookinbox(cli_config, "reconcile", "--json")
        findings = {f["check"]: f["count"] for f in json.loads(checked.stdout)["findings"]}
        assert findings["held_keys"] == 1

        handlers.FAIL_ORDERED.clear()
        retried = run_hookinbox(cli_config, "dlq", "retry", head.id)
        assert retried.returncode == 0, retried.stderr
        await wait_for_status(inbox.store, "evt_head", "completed")
        await wait_for_status(inbox.store, "evt_next", "completed")
        report = await ops.reconcile(inbox.store, config, checks=VIEWS.checks)
        assert [f.count for f in report.findings if f.check == "held_keys"] == [0]
    assert [call[1] for call in handlers.ORDERED if call[0] == "cus_1"] == [
        head.id.split(":")[0],
        waiting.id.split(":")[0],
    ]


async def test_a_delivery_without_the_key_and_a_header_key(
    db_url: str, client: httpx.AsyncClient
) -> None:
    """A delivery that lacks the value runs unordered; a header names the key too."""
    routes = [
        {**ORDERED_ROUTE, "order_key": "/data/missing"},
        {
            "events": ["*"],
            "action": "by_header",
            "handler": "tests.support.handlers:count",
            "order_key": "header:X-Customer-Id",
        },
    ]
    config = make_config(db_url, routes=routes, worker=FAST)
    async with running_inbox(config) as inbox:
        body, headers = signed(event_body("evt_h", customer="c"), event_id="evt_h")
        answer = await client.post(
            inbox.url(), content=body, headers={**headers, "x-customer-id": "cus_9"}
        )
        assert answer.status_code == 200
        await wait_for_status(inbox.store, "evt_h", "completed")
        keys = await _order_keys(inbox.store, "evt_h")
    assert keys["apply"] is None
    assert keys["by_header"] is not None and len(keys["by_header"]) == 64
    assert "cus_9" not in keys["by_header"]


async def _order_keys(store: Store, event_id: str) -> dict[str, str | None]:
    delivery = await store.journal.get_delivery(event_id)
    assert delivery is not None
    key_of = Sql("SELECT order_key FROM jobs WHERE id = :id")
    return {job.action: await store._db.value(key_of, id=job.id) for job in delivery.jobs}


@pytest.mark.parametrize(
    ("route", "message"),
    [
        ({"order_key": "data.customer"}, "neither a JSON pointer"),
        ({"order_key": "header:Stripe-Signature"}, "credential or a signature"),
        ({"order_key": "header:bad header"}, "not an HTTP header name"),
        ({"on_dead_letter": "hold"}, "needs order_key"),
        ({"order_key": "/a", "on_dead_letter": "keep"}, "on_dead_letter"),
    ],
)
def test_an_ordered_route_is_checked_when_the_config_loads(
    route: dict[str, Any], message: str
) -> None:
    data = {
        "database": "sqlite:///x.db",
        "sources": {
            "test": {
                "scheme": "standard-webhooks",
                "secret_env": "HB_TEST_SECRET",
                "routes": [{"events": ["*"], "action": "a", "handler": "m:f", **route}],
            }
        },
    }
    with pytest.raises(ConfigError, match=message):
        config_from_mapping(data)
