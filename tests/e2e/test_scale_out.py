"""Scale-out on PostgreSQL ONLY: 2 receiver processes and 3 worker processes (separate
``hookinbox serve --no-workers`` and ``hookinbox worker`` processes, as on other hosts)
share one database while deliveries, 30% of them repeats, arrive at both receivers at once.

The counts must be exact: one journal row per event id, one completed job per route, one
effect per business key at a counting sink (a forward's ``Idempotency-Key``). SQLite is
not in it: several hosts sharing one store is what PostgreSQL is for.

``HOOKINBOX_SCALE_OUT_DELIVERIES`` sets how many deliveries are sent (2,000 by default, a
run well under a minute here; ``bench/run.py --modes scaleout`` runs it with 20,000).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import random
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from hookinbox.verify.standard_webhooks import decode_secret, signature_of
from tests.support.configs import write_config
from tests.support.database import pg_schema_url
from tests.support.processes import HookinboxProcess, free_port, hookinbox_env
from tests.support.signing import SECRET, event_body

DELIVERIES = int(os.environ.get("HOOKINBOX_SCALE_OUT_DELIVERIES", "2000"))
REPEATS = 0.30
SENDERS = 48


class CountingSink:
    """The internal service a forward route posts to: counts each Idempotency-Key."""

    def __init__(self) -> None:
        self.keys: collections.Counter[str] = collections.Counter()
        lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                with lock:
                    owner.keys[self.headers.get("idempotency-key", "")] += 1
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/effects"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> CountingSink:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def signed_deliveries(count: int, repeats: float) -> tuple[list[str], list[tuple[bytes, dict]]]:
    """``count`` signed deliveries, ``repeats`` of them a second send of an earlier event
    (same id, same body), shuffled so repeats race their originals."""
    unique = count - int(count * repeats)
    key = decode_secret(SECRET)
    stamp = str(int(time.time()))
    ids = [f"evt_scale_{n:06d}" for n in range(unique)]
    signed = {}
    for event_id in ids:
        body = event_body(event_id)
        signed[event_id] = (
            body,
            {
                "webhook-id": event_id,
                "webhook-timestamp": stamp,
                "webhook-signature": f"v1,{signature_of(key, event_id, stamp, body)}",
                "content-type": "application/json",
            },
        )
    rng = random.Random(11)
    order = ids + [rng.choice(ids) for _ in range(count - unique)]
    rng.shuffle(order)
    return ids, [signed[event_id] for event_id in order]


async def send_all(urls: list[str], deliveries: list[tuple[bytes, dict]]) -> collections.Counter:
    """Every delivery once, SENDERS at a time, alternating receivers; the answers' status."""
    answers: collections.Counter[str] = collections.Counter()
    pending = iter(enumerate(deliveries))

    async def lane() -> None:
        # A client per lane: one pool of many connections costs the sender more CPU per
        # request than the receivers spend. A connection idle for a second is not used
        # again: the receivers close idle ones after 5 s, and one closed just as a request
        # went out on it was a ReadError on a loaded machine (httpx's own expiry is 5 s).
        limits = httpx.Limits(keepalive_expiry=1.0)
        async with httpx.AsyncClient(timeout=30, limits=limits) as client:
            for n, (body, headers) in pending:
                answer = await client.post(urls[n % len(urls)], content=body, headers=headers)
                status = answer.json().get("status") if answer.status_code == 200 else None
                answers[status or f"http_{answer.status_code}"] += 1

    await asyncio.gather(*(lane() for _ in range(SENDERS)))
    return answers


async def wait_for_all_jobs(conn: asyncpg.Connection, expected: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await conn.fetchval("SELECT count(*) FROM jobs WHERE state = 'completed'") >= expected:
            return
        await asyncio.sleep(0.2)
    states = await conn.fetch("SELECT state, count(*) FROM jobs GROUP BY state")
    raise AssertionError(f"jobs not all completed after {timeout}s: {dict(states)}")


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL schema (this scenario does not run on SQLite)."""
    with pg_schema_url() as url:
        yield url


@pytest.mark.slow
async def test_two_receivers_and_three_workers_on_one_postgres_count_exactly(
    tmp_path: Path, pg_url: str
) -> None:
    ids, deliveries = signed_deliveries(DELIVERIES, REPEATS)
    url = pg_url
    with CountingSink() as sink:
        routes = [
            {"events": ["*"], "action": "noop", "handler": "hookinbox.examples:noop"},
            {"events": ["*"], "action": "effect", "forward": sink.url},
        ]
        worker = {"concurrency": 16, "lease_seconds": 10, "poll_interval_seconds": 1}
        ports = [free_port(), free_port()]
        configs = [
            write_config(tmp_path / f"r{n}.toml", url, routes=routes, port=port, worker=worker)
            for n, port in enumerate(ports)
        ]
        env = hookinbox_env()
        migrate = HookinboxProcess(
            ["migrate", "--config", str(configs[0])], env, tmp_path / "m.log"
        )
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
        processes = receivers + workers
        base, _, schema = url.partition("?search_path=")
        conn = await asyncpg.connect(base, server_settings={"search_path": schema})
        try:
            for process in processes:
                process.start()
            for receiver, port in zip(receivers, ports, strict=True):
                await asyncio.to_thread(receiver.wait_healthy, f"http://127.0.0.1:{port}")
            started = time.monotonic()
            answers = await send_all(
                [f"http://127.0.0.1:{port}/webhooks/test" for port in ports], deliveries
            )
            sent = time.monotonic()
            await wait_for_all_jobs(conn, 2 * len(ids), timeout=60 + DELIVERIES / 50)
            done = time.monotonic()

            journal = await conn.fetch(
                "SELECT event_id, delivery_count FROM deliveries WHERE source = 'test'"
            )
            jobs = await conn.fetch(
                "SELECT d.event_id, j.action, j.state, count(*) OVER"
                " (PARTITION BY d.event_id, j.action) AS per_route"
                " FROM jobs j JOIN deliveries d ON d.id = j.delivery_id"
            )
            effects = await conn.fetchval("SELECT count(*) FROM effects WHERE state = 'recorded'")
            forward_jobs = {
                r["id"] for r in await conn.fetch("SELECT id FROM jobs WHERE action = 'effect'")
            }
        finally:
            await conn.close()
            for process in processes:
                process.stop()

    logs = "\n".join(p.output()[-1500:] for p in processes)
    # Every delivery answered 200: one `accepted` per event id, the rest duplicates.
    assert answers == {"accepted": len(ids), "duplicate": DELIVERIES - len(ids)}, logs
    # One journal row per event id, counting every send of it.
    assert sorted(r["event_id"] for r in journal) == ids
    assert sum(r["delivery_count"] for r in journal) == DELIVERIES
    # One completed job per route per event.
    assert len(jobs) == 2 * len(ids)
    assert {(r["action"], r["state"], r["per_route"]) for r in jobs} == {
        ("noop", "completed", 1),
        ("effect", "completed", 1),
    }
    # One effect per business key at the sink (a forward's key is its job's stable id).
    assert set(sink.keys) == forward_jobs and len(forward_jobs) == len(ids), logs
    # ... and one recorded effect per forward in the ledger.
    assert effects == len(ids)
    resent = sum(sink.keys.values()) - len(sink.keys)
    print(
        "\nscale-out: "
        + json.dumps(
            {
                "deliveries": DELIVERIES,
                "events": len(ids),
                "send_s": round(sent - started, 2),
                "accepted_per_s": round(DELIVERIES / (sent - started)),
                "all_done_s": round(done - started, 2),
                "jobs_per_s": round(2 * len(ids) / (done - started)),
                "forwards_sent_again": resent,
            }
        )
    )
