"""Ordered routes across processes, on PostgreSQL ONLY: 2 receiver processes and 3 worker
processes (``hookinbox serve --no-workers``, ``hookinbox worker``, as on other hosts) while
50 keys x 40 events arrive shuffled, 48 at a time, at both receivers. Every key's handler
calls must be in reservation (delivery id) order, one at a time, each event exactly once,
and the work spread over the workers. The claim holds this by itself: one statement with
FOR UPDATE SKIP LOCKED that takes a job only when no earlier job of its key is unfinished
(docs/concepts/ordering.md)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.support.configs import write_config
from tests.support.database import pg_schema_url
from tests.support.ordering import Call, assert_in_reservation_order
from tests.support.processes import HookinboxProcess, free_port, hookinbox_env
from tests.support.signing import event_body, signed

KEYS = 50
PER_KEY = 40
SENDERS = 48


@pytest.fixture
def pg_url() -> Iterator[str]:
    with pg_schema_url() as url:
        yield url


def _deliveries() -> list[tuple[str, str, bytes, dict[str, str]]]:
    """(event id, key, body, headers) for every event, shuffled."""
    events = [(f"evt_{k:02d}_{n:02d}", f"cus_{k:02d}") for k in range(KEYS) for n in range(PER_KEY)]
    random.Random(23).shuffle(events)
    found = []
    for event_id, key in events:
        body, headers = signed(event_body(event_id, customer=key), event_id=event_id)
        found.append((event_id, key, body, headers))
    return found


async def _send_all(urls: list[str], deliveries: list[tuple[str, str, bytes, dict]]) -> None:
    pending = iter(enumerate(deliveries))

    async def lane() -> None:
        limits = httpx.Limits(keepalive_expiry=1.0)
        async with httpx.AsyncClient(timeout=30, limits=limits) as client:
            for n, (_, _, body, headers) in pending:
                answer = await client.post(urls[n % len(urls)], content=body, headers=headers)
                assert answer.status_code == 200, answer.text

    await asyncio.gather(*(lane() for _ in range(SENDERS)))


async def _wait_completed(conn: asyncpg.Connection, expected: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await conn.fetchval("SELECT count(*) FROM jobs WHERE state = 'completed'") >= expected:
            return
        await asyncio.sleep(0.2)
    states = await conn.fetch("SELECT state, count(*) FROM jobs GROUP BY state")
    raise AssertionError(f"jobs not all completed after {timeout}s: {dict(states)}")


def _calls(log: Path) -> list[Call]:
    calls = []
    for line in log.read_text().splitlines():
        key, delivery_id, _event_id, start, end, pid = line.split("\t")
        calls.append((key, delivery_id, float(start), float(end), int(pid)))
    return calls


@pytest.mark.slow
async def test_three_worker_processes_run_each_key_in_reservation_order(
    tmp_path: Path, pg_url: str
) -> None:
    deliveries = _deliveries()
    log = tmp_path / "calls.tsv"
    routes = [
        {
            "events": ["*"],
            "action": "apply",
            "handler": "tests.support.handlers:ordered",
            "order_key": "/data/customer",
        }
    ]
    worker = {
        "concurrency": 8,
        "lease_seconds": 10,
        "poll_interval_seconds": 0.2,
        # order_grace_seconds: the default (1 s). Two receivers under 48 senders commit
        # out of id order, and on a loaded machine a commit outlasts a shorter grace.
    }
    ports = [free_port(), free_port()]
    configs = [
        write_config(tmp_path / f"r{n}.toml", pg_url, routes=routes, port=port, worker=worker)
        for n, port in enumerate(ports)
    ]
    env = hookinbox_env({"HB_TEST_ORDER_LOG": str(log)})
    migrate = HookinboxProcess(["migrate", "--config", str(configs[0])], env, tmp_path / "m.log")
    assert migrate.start().proc is not None and migrate.proc.wait(timeout=60) == 0
    migrate.stop()
    receivers = [
        HookinboxProcess(
            ["serve", "--no-workers", "--log-level", "warning", "--config", str(config)],
            env,
            tmp_path / f"receiver{n}.log",
        )
        for n, config in enumerate(configs)
    ]
    workers = [
        HookinboxProcess(
            ["worker", "--log-level", "warning", "--config", str(configs[n % 2])],
            env,
            tmp_path / f"worker{n}.log",
        )
        for n in range(3)
    ]
    base, _, schema = pg_url.partition("?search_path=")
    conn = await asyncpg.connect(base, server_settings={"search_path": schema})
    try:
        for process in receivers + workers:
            process.start()
        for receiver, port in zip(receivers, ports, strict=True):
            await asyncio.to_thread(receiver.wait_healthy, f"http://127.0.0.1:{port}")
        await _send_all([f"http://127.0.0.1:{port}/webhooks/test" for port in ports], deliveries)
        await _wait_completed(conn, len(deliveries), timeout=45)
        rows = await conn.fetch(
            "SELECT d.event_id, d.id, j.attempts FROM deliveries d JOIN jobs j"
            " ON j.delivery_id = d.id"
        )
    finally:
        await conn.close()
        for process in workers + receivers:
            process.stop()
    key_of = {event_id: key for event_id, key, _, _ in deliveries}
    expected: dict[str, list[str]] = {}
    for row in rows:
        expected.setdefault(key_of[row["event_id"]], []).append(row["id"])
    assert len(rows) == KEYS * PER_KEY and {row["attempts"] for row in rows} == {1}
    calls = _calls(log)
    assert len(calls) == KEYS * PER_KEY
    assert_in_reservation_order(calls, expected)
    assert len({pid for *_, pid in calls}) == 3, "every worker process took jobs"
