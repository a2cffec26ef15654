"""``[destinations.NAME]`` end to end, on both stores against a real local HTTP target:
the rate and the forwards in flight hold jobs without spending attempts, the circuit
opens after failures in a row, holds the destination's jobs, lets one probe through after
the cool-down and closes on success; its state is a metric, an admin page and a notice.
On PostgreSQL two worker processes share max_in_flight."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookinbox.config import Config, config_from_mapping
from hookinbox.errors import ConfigError
from hookinbox.resources.relay import OutboxRelay
from hookinbox.store import open_store_for
from tests.admin.support import TOKEN, login
from tests.support.configs import write_config
from tests.support.database import pg_schema_url
from tests.support.inbox import make_config, running_inbox
from tests.support.journal import add_delivery
from tests.support.processes import HookinboxProcess, hookinbox_env
from tests.support.signing import delivery
from tests.support.target import Answer, RecordingTarget
from tests.support.waiting import wait_for, wait_for_status


def destination_config(db_url: str, url: str, **destination: Any) -> Config:
    return make_config(
        db_url,
        routes=[{"events": ["*"], "action": "relay", "destination": "crm"}],
        worker={"max_attempts": 1, "concurrency": 8},
        destinations={"crm": {"url": url, "timeout_seconds": 2, **destination}},
        notify={"ops": {"url": "http://127.0.0.1:9/unused", "on": ["circuit_open"]}},
    )


async def _send(client: httpx.AsyncClient, url: str, event_ids: list[str]) -> None:
    for event_id in event_ids:
        body, headers = delivery(event_id)
        assert (await client.post(url, content=body, headers=headers)).status_code == 200


async def _outcomes(inbox: Any, event_id: str) -> list[tuple[str, str | None]]:
    found = await inbox.store.journal.get_delivery(event_id)
    assert found is not None
    history = await inbox.store.queue.list_attempts(found.jobs[0].id)
    return [(a.outcome, a.error_code) for a in history]


async def test_the_rate_holds_jobs_without_spending_their_one_attempt(
    db_url: str, client: httpx.AsyncClient
) -> None:
    events = [f"evt_rate_{n}" for n in range(6)]
    with RecordingTarget() as target:
        config = destination_config(db_url, target.url, rate_per_second=4, burst=1)
        async with running_inbox(config) as inbox:
            await _send(client, inbox.url(), events)
            for event_id in events:
                await wait_for_status(inbox.store, event_id, "completed")
            histories = [await _outcomes(inbox, e) for e in events]
    assert len(target.requests) == 6
    spread = target.arrivals[-1] - target.arrivals[0]
    assert spread >= 5 / 4 - 0.15  # 4 a second, a burst of 1: the sixth ~1.25 s after the first
    held = [h for h in histories if ("deferred", "destination_rate") in h]
    assert held and all(h[-1] == ("completed", None) for h in histories)


async def test_max_in_flight_bounds_the_forwards_under_way(
    db_url: str, client: httpx.AsyncClient
) -> None:
    events = [f"evt_busy_{n}" for n in range(6)]
    with RecordingTarget(delay=0.3) as target:
        config = destination_config(db_url, target.url, max_in_flight=2)
        async with running_inbox(config) as inbox:
            await _send(client, inbox.url(), events)
            for event_id in events:
                await wait_for_status(inbox.store, event_id, "completed")
    assert len(target.requests) == 6
    assert target.max_in_flight == 2


async def test_the_circuit_opens_holds_probes_once_and_closes(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two 503s open it; the jobs behind are held (nothing sent) through the cool-down;
    then one probe, which succeeds, closes it and the rest go."""
    monkeypatch.setenv("HOOKINBOX_ADMIN_TOKEN", TOKEN)
    down: list[Answer] = [503, 503]
    with RecordingTarget(statuses=down) as target:
        config = destination_config(db_url, target.url, circuit_failures=2, circuit_cooldown="5s")
        config = config.model_copy(
            update={"worker": config.worker.model_copy(update={"max_attempts": 5})}
        )
        async with running_inbox(config) as inbox, httpx.AsyncClient() as admin:
            await _send(client, inbox.url(), ["evt_c1", "evt_c2"])

            async def opened() -> bool:
                (row,) = await _rows(inbox)
                return row.circuit == "open"

            await wait_for(opened, 10, "the circuit to open")
            sent_when_open = len(target.requests)
            await _send(client, inbox.url(), ["evt_c3"])
            await login(admin, inbox.base_url)
            page = (await admin.get(f"{inbox.base_url}/admin/destinations")).text
            metrics = (await admin.get(f"{inbox.base_url}/metrics")).text
            relay = OutboxRelay(config.outbox, inbox.store, notify=config.notify)
            assert await relay.sweep_notices() == 1
            assert await relay.sweep_notices() == 0  # one notice per window
            await relay.run_stop_now()
            await asyncio.sleep(0.5)
            assert len(target.requests) == sent_when_open  # held: nothing sent while open
            for event_id in ("evt_c1", "evt_c2", "evt_c3"):
                await wait_for_status(inbox.store, event_id, "completed")
            (closed,) = await _rows(inbox)
            held = await _outcomes(inbox, "evt_c3")
            notices = await inbox.store.outbox.list_outbox(kind="notify:ops")
    assert sent_when_open == 2
    assert 'data-destination="crm"' in page and ">open" in page
    assert 'hookinbox_destination_circuit_open{destination="crm"} 1.0' in metrics
    assert ("deferred", "circuit_open") in held and held[-1] == ("completed", None)
    assert closed.circuit == "closed" and closed.openings == 1
    (notice,) = notices
    assert notice.key.startswith("notify:ops:circuit_open::crm:consecutive_failures:")
    assert notice.body["subject"] == "crm"  # type: ignore[index]


async def _rows(inbox: Any) -> list[Any]:
    from hookinbox import ops

    return await ops.list_destinations(inbox.store, inbox.inbox.config)


@pytest.mark.parametrize(
    ("destinations", "route", "says"),
    [
        ({}, {"destination": "nope"}, "routes.0.destination: no destination named 'nope'"),
        ({"crm": {"url": "ftp://x"}}, {"destination": "crm"}, "destinations.crm.url"),
        (
            {"crm": {"url": "http://x", "circuit_cooldown": "soon"}},
            {"destination": "crm"},
            "destinations.crm.circuit_cooldown: not a duration",
        ),
        ({"crm": {"url": "http://x", "max_in_flight": 0}}, {"destination": "crm"}, "max_in_flight"),
        (
            {"crm": {"url": "http://x"}},
            {"destination": "crm", "forward": "http://y"},
            "exactly one of",
        ),
    ],
)
def test_a_bad_destination_is_one_config_error_line(
    destinations: dict[str, Any], route: dict[str, Any], says: str
) -> None:
    data = {
        "destinations": destinations,
        "sources": {
            "s": {"secret_env": "HB_X", "routes": [{"events": ["*"], "action": "a", **route}]}
        },
    }
    with pytest.raises(ConfigError) as caught:
        config_from_mapping(data)
    assert says in caught.value.message and "\n" not in caught.value.message


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with pg_schema_url() as url:
        yield url


async def test_two_worker_processes_share_max_in_flight(postgres_url: str, tmp_path: Path) -> None:
    """Each process could run four forwards at once; the destination allows two, in all."""
    with RecordingTarget(delay=0.4) as target:
        config = write_config(
            tmp_path / "h.toml",
            postgres_url,
            routes=[{"events": ["*"], "action": "relay", "destination": "crm"}],
            worker={"max_attempts": 1, "concurrency": 4},
            extra=(
                f'[destinations.crm]\nurl = "{target.url}"\nmax_in_flight = 2\n'
                "timeout_seconds = 5\n"
            ),
        )
        workers = [
            HookinboxProcess(
                ["worker", "--config", str(config)], hookinbox_env({}), tmp_path / f"w{n}.log"
            ).start()
            for n in range(2)
        ]
        try:
            # Both processes working before the first delivery: one that starts after the
            # other has forwarded all ten (2 s at two at a time) would take none of them.
            async def both_started() -> bool:
                logs = [tmp_path / f"w{n}.log" for n in range(2)]
                return all(p.exists() and "worker_started" in p.read_text() for p in logs)

            await wait_for(both_started, 30, "both worker processes started")
            store = open_store_for(postgres_url)
            await store.open()
            try:
                for n in range(10):
                    await add_delivery(store, f"evt_two_{n}", actions=("relay",))

                async def all_done() -> bool:
                    found = [await store.journal.get_delivery(f"evt_two_{n}") for n in range(10)]
                    return all(f is not None and f.status == "completed" for f in found)

                await wait_for(all_done, 60, "ten forwards through two workers")
                workers_seen = set()
                for n in range(10):
                    found = await store.journal.get_delivery(f"evt_two_{n}")
                    assert found is not None
                    for attempt in await store.queue.list_attempts(found.jobs[0].id):
                        workers_seen.add(attempt.worker)
            finally:
                await store.close()
        finally:
            for worker in workers:
                worker.stop()
    assert len(target.requests) == 10
    assert target.max_in_flight == 2
    assert len(workers_seen) == 2  # both processes took part
