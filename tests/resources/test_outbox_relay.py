"""The outbox relay when the receiving side fails, on both stores: backoff, the dead letter
after ``max_attempts``, ``hookinbox outbox retry`` sending a dead letter once, the
Python-callable sender (errors, its timeout) and the lease kept while a send is slow."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hookinbox import ops
from hookinbox.config.resources import OutboxSettings
from hookinbox.resources.relay import OutboxRelay
from hookinbox.resources.trace import TRACE_LAYERS
from hookinbox.store import Store
from tests.resources import support
from tests.resources.support import NotifyService, ready_outbox_row
from tests.support.inbox import make_config
from tests.support.processes import REPO, hookinbox_env

FAST = {"backoff_base_seconds": 0.05, "backoff_max_seconds": 0.1, "poll_interval_seconds": 0.05}


def hookinbox_cli(db_url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``hookinbox`` command over the test's store, with ``--json``."""
    config = tmp_path / "hookinbox.toml"
    config.write_text(f'database = "{db_url}"\n')
    return subprocess.run(
        [sys.executable, "-m", "hookinbox.cli", *args, "--json", "--config", str(config)],
        env=hookinbox_env({"HOOKINBOX_ACTOR": "cli:test-operator"}),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def relay(store: Store, **settings: Any) -> OutboxRelay:
    return OutboxRelay(OutboxSettings(**{**FAST, **settings}), store)


async def relay_until(relay: OutboxRelay, store: Store, key: str, state: str) -> Any:
    """Run the relay's turns until the row is in ``state`` (at most 10 s)."""
    for _ in range(200):
        await relay.relay_once()
        row = await store.outbox.get_outbox(key)
        if row is not None and row.state == state:
            return row
        await asyncio.sleep(0.05)
    raise AssertionError(f"outbox row {key} never became {state}")


async def test_a_refused_send_backs_off_then_is_sent_once(store: Store) -> None:
    key = await ready_outbox_row(store, "prov-1")
    assert (await store.reads.read_store_gauges()).outbox_unsent == {"test": 1}
    with NotifyService() as notify:
        notify.status = 503
        sender = relay(store, forward=notify.url, backoff_base_seconds=3, backoff_max_seconds=3)
        before = datetime.now(UTC)
        assert await sender.relay_once() == 1
        after = datetime.now(UTC)
        row = await store.outbox.get_outbox(key)
        assert row is not None and (row.state, row.attempts, row.last_error) == (
            "pending",
            1,
            "http_503",
        )
        assert row.next_attempt_at is not None
        # Backoff: jittered over the upper half of 3 s, from the failure (whenever within
        # the relay's turn it was written).
        assert before + timedelta(seconds=1.5) <= row.next_attempt_at
        assert row.next_attempt_at <= after + timedelta(seconds=3)
        assert await sender.relay_once() == 0  # not due yet
        notify.status = 200
        sent = await relay_until(sender, store, key, "sent")
    assert sent.attempts == 2 and sent.last_error == "http_503"
    assert notify.keys() == {key: 2} and notify.handled == {key: 1}


async def test_a_row_is_dead_lettered_after_max_attempts_then_retried_once(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    key = await ready_outbox_row(store, "prov-1")
    with NotifyService() as notify:
        notify.status = 500
        sender = relay(store, forward=notify.url, max_attempts=3)
        failed = await relay_until(sender, store, key, "failed")
        assert (failed.attempts, failed.last_error) == (3, "http_500")
        assert failed.failed_at is not None
        gauges = await store.reads.read_store_gauges()  # hookinbox_outbox_failed, not _unsent
        assert (gauges.outbox_failed, gauges.outbox_unsent) == ({"test": 1}, {})
        await asyncio.sleep(0.2)
        assert await sender.relay_once() == 0  # a dead letter is not sent again by itself
        assert len(notify.requests) == 3 and notify.handled == {}

        notify.status = 200
        retried = await asyncio.to_thread(hookinbox_cli, db_url, tmp_path, "outbox", "retry", key)
        assert retried.returncode == 0, retried.stderr
        assert json.loads(retried.stdout)["state"] == "pending"
        sent = await relay_until(sender, store, key, "sent")
        await asyncio.sleep(0.2)
        assert await sender.relay_once() == 0
    assert sent.attempts == 1  # the retry starts a fresh budget
    gauges = await store.reads.read_store_gauges()
    assert (gauges.outbox_failed, gauges.outbox_unsent) == ({}, {})
    assert len(notify.requests) == 4 and notify.handled == {key: 1}
    (audit,) = await store.audit.list_operator_actions()
    assert (audit.actor, audit.command, audit.detail) == (
        "cli:test-operator",
        "outbox-retry",
        f"outbox {key}",
    )
    assert audit.delivery_id is not None


async def test_resend_and_replay_of_a_notification_are_audited_on_its_delivery(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    key = await ready_outbox_row(store, "prov-1", event_id="evt_ready")
    for args in (("outbox", "resend", key), ("replay", "--outbox", key)):
        done = await asyncio.to_thread(hookinbox_cli, db_url, tmp_path, *args)
        assert done.returncode == 0, done.stderr
    refused = await asyncio.to_thread(hookinbox_cli, db_url, tmp_path, "outbox", "retry", key)
    assert refused.returncode != 0  # not a dead letter: refused, and not audited
    config = make_config(db_url)
    (traced,) = (await ops.trace(store, config, "evt_ready", layers=TRACE_LAYERS)).deliveries
    assert [(a.actor, a.command, a.detail) for a in traced.operator_actions] == [
        ("cli:test-operator", "outbox-resend", f"outbox {key}"),
        ("cli:test-operator", "replay-outbox", f"outbox {key}"),
    ]
    row = await store.outbox.get_outbox(key)
    assert row is not None and (row.state, row.attempts) == ("pending", 0)


async def test_the_python_callable_sender_gets_the_key_and_its_errors_are_retried(
    store: Store,
) -> None:
    support.RECEIVED.clear()
    key = await ready_outbox_row(store, "prov-1")
    refusing = relay(store, handler="tests.resources.support:refuse_message", max_attempts=2)
    assert await refusing.relay_once() == 1
    row = await store.outbox.get_outbox(key)
    assert row is not None and (row.state, row.last_error) == ("pending", "ConnectionRefusedError")
    failed = await relay_until(refusing, store, key, "failed")
    assert failed.attempts == 2

    await store.outbox.requeue_outbox(key, only_failed=True)
    recording = relay(store, handler="tests.resources.support:record_message")
    await relay_until(recording, store, key, "sent")
    (message,) = support.RECEIVED
    assert (message.key, message.kind, message.attempt) == (key, "video-ready", 1)
    assert message.body["state"] == "ready"


async def test_a_hanging_callable_is_bounded_by_the_timeout(store: Store) -> None:
    key = await ready_outbox_row(store, "prov-1")
    hanging = relay(store, handler="tests.resources.support:hang_on_message", timeout_seconds=0.2)
    started = asyncio.get_running_loop().time()
    assert await hanging.relay_once() == 1
    assert asyncio.get_running_loop().time() - started < 5  # 25 timeouts, not the hour
    row = await store.outbox.get_outbox(key)
    assert row is not None and (row.state, row.last_error) == ("pending", "timeout")


async def test_a_slow_send_keeps_its_lease_so_no_second_relay_sends_it(store: Store) -> None:
    support.RECEIVED.clear()
    key = await ready_outbox_row(store, "prov-1")
    slow = relay(
        store, handler="tests.resources.support:slow_message", lease_seconds=1, timeout_seconds=5
    )
    sending = asyncio.create_task(slow.relay_once())
    await asyncio.sleep(1.4)  # past the first lease: renewed meanwhile
    assert await store.outbox.claim_outbox("another-relay", 10, 1, 10) == []
    assert await sending == 1
    row = await store.outbox.get_outbox(key)
    assert row is not None and (row.state, row.attempts) == ("sent", 1)
    assert [m.key for m in support.RECEIVED] == [key]
