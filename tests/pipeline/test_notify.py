"""Notifications through the outbox, on both stores: one notice per source/subject/reason
per window, never repeated by a second sweep, rate-limited, sent by the relay under its
stable key as JSON or Slack text; the outbox's other rows untouched by a notifier-only
relay."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from hookinbox import ops
from hookinbox.config import config_from_mapping
from hookinbox.errors import ConfigError
from hookinbox.resources.relay import OutboxRelay
from hookinbox.store import Store
from tests.support.journal import add_delivery, settle_all
from tests.support.signing import SECRET_ENV
from tests.support.target import RecordingTarget


def config_with(db_url: str, **notifier: Any) -> Any:
    return config_from_mapping(
        {
            "database": db_url,
            "sources": {"test": {"secret_env": SECRET_ENV}, "other": {"secret_env": SECRET_ENV}},
            "outbox": {"backoff_base_seconds": 0.1, "backoff_max_seconds": 0.2},
            "notify": {"ops": {"url": "http://127.0.0.1:9/unused", **notifier}},
        }
    )


async def dead_letters(store: Store, n: int, *, error: str = "crm_unavailable") -> None:
    for i in range(n):
        await add_delivery(store, f"evt_dead_{error}_{i}", actions=("crm",))
    await settle_all(store, "failed", error=error)


async def test_dead_letters_become_one_notice_per_window_never_repeated(store: Store) -> None:
    config = config_with(store.url)
    relay = OutboxRelay(config.outbox, store, notify=config.notify)
    await dead_letters(store, 3)
    await dead_letters(store, 2, error="http_503")
    assert await relay.sweep_notices() == 2
    assert await relay.sweep_notices() == 0  # the same facts: the same keys, nothing new
    rows = await store.outbox.list_outbox(kind="notify:ops")
    bodies = sorted((r.body["reason"], r.body["count"]) for r in rows)  # type: ignore[index]
    assert bodies == [("crm_unavailable", 3), ("http_503", 2)]
    for row in rows:
        assert row.key.startswith("notify:ops:dead_letter:test:crm:")
    await relay.run_stop_now()  # closes its client


async def test_a_notifier_sees_only_its_kinds_and_sources_and_its_hourly_budget(
    store: Store,
) -> None:
    config = config_with(store.url, on=["rejected_delivery"], sources=["other"], max_per_hour=1)
    relay = OutboxRelay(config.outbox, store, notify=config.notify)
    await dead_letters(store, 1)
    assert await relay.sweep_notices() == 0
    await ops.pause_source(store, config, "test", actor="cli:ana", reason="contract change")
    assert await relay.sweep_notices() == 0
    await relay.run_stop_now()

    config = config_with(store.url, on=["source_paused", "dead_letter"], max_per_hour=1)
    relay = OutboxRelay(config.outbox, store, notify=config.notify)
    assert await relay.sweep_notices() == 1  # two facts, a budget of one an hour
    assert await relay.sweep_notices() == 0
    assert len(await store.outbox.list_outbox(kind="notify:ops")) == 1
    await relay.run_stop_now()


@pytest.mark.parametrize("fmt", ["json", "slack"])
async def test_the_relay_sends_notices_under_their_key_and_leaves_other_rows(
    store: Store, fmt: str
) -> None:
    with RecordingTarget(statuses=[503]) as target:
        config = config_with(store.url, url=target.url, format=fmt)
        relay = OutboxRelay(config.outbox, store, notify=config.notify)
        await dead_letters(store, 2)
        assert await relay.sweep_notices() == 1
        # A notifier-only relay (no [outbox] sender) claims notices only.
        while await relay.relay_once():
            pass
        for _ in range(50):
            (row,) = await store.outbox.list_outbox(kind="notify:ops")
            if row.state == "sent":
                break
            await asyncio.sleep(0.1)
            await relay.relay_once()
        await relay.run_stop_now()
    assert row.state == "sent" and row.attempts == 2  # a 503 first: retried, same key
    first, second = target.requests
    assert first["headers"]["idempotency-key"] == second["headers"]["idempotency-key"] == row.key
    body = json.loads(second["body"])
    if fmt == "json":
        assert (body["kind"], body["source"], body["subject"], body["count"]) == (
            "dead_letter",
            "test",
            "crm",
            2,
        )
    else:
        assert set(body) == {"text"}
        assert "dead letters in *test*" in body["text"] and "crm_unavailable" in body["text"]


def test_a_notifier_is_checked_at_start_up() -> None:
    base = {"sources": {"s": {"secret_env": "S"}}}
    with pytest.raises(ConfigError, match=r"notify\.ops: a notifier needs exactly one of"):
        config_from_mapping({**base, "notify": {"ops": {}}})
    with pytest.raises(ConfigError, match=r"notify\.ops\.sources: no source named 'x'"):
        config_from_mapping({**base, "notify": {"ops": {"url_env": "U", "sources": ["x"]}}})
    with pytest.raises(ConfigError, match=r"notify\.ops\.window: .*whole number of minutes"):
        config_from_mapping({**base, "notify": {"ops": {"url_env": "U", "window": "90s"}}})
    with pytest.raises(ConfigError, match=r"notify\.ops\.on\.0"):
        config_from_mapping({**base, "notify": {"ops": {"url_env": "U", "on": ["everything"]}}})
    circuit = config_from_mapping(
        {**base, "notify": {"ops": {"url_env": "U", "on": ["circuit_open"]}}}
    )
    assert circuit.notify["ops"].on == ("circuit_open",)
