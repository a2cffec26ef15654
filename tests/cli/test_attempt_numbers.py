"""Attempt numbers count on across a replay and a dead-letter retry, on both stores: the
``hookinbox`` command (trace, replay, dlq retry) in a subprocess and the JSON API over
HTTP read the same numbers, and each requeue grants the route's attempts again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookinbox.store import Store
from tests.support.configs import write_config
from tests.support.inbox import make_config, running_inbox
from tests.support.processes import run_hookinbox
from tests.support.signing import delivery
from tests.support.waiting import wait_for

ROUTE = {"events": ["*"], "action": "crm", "handler": "tests.support.handlers:always_fails"}
WORKER = {"max_attempts": 2, "backoff_base_seconds": 0.05, "backoff_max_seconds": 0.1}
TOKEN = "reader-token-for-attempts-0123456789"


def _cli(config: Path, *args: str) -> dict[str, Any]:
    done = run_hookinbox(config, *args, "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


async def _dead_after(store: Store, event_id: str, attempts: int) -> None:
    async def dead() -> bool:
        found = await store.journal.get_delivery(event_id)
        return bool(
            found and found.jobs[0].state == "failed" and found.jobs[0].attempts == attempts
        )

    await wait_for(dead, 15, f"{event_id} dead-lettered after {attempts} attempts")


def _numbers(job: dict[str, Any]) -> list[tuple[int, str]]:
    return [(a["number"], a["trigger"]) for a in job["attempt_history"]]


async def test_attempts_number_on_across_replay_and_dlq_retry(
    db_url: str, tmp_path: Path, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKINBOX_API_TOKENS", f"ci:read:{TOKEN}")
    config_path = write_config(tmp_path / "hookinbox.toml", db_url, routes=[ROUTE], worker=WORKER)
    config = make_config(db_url, routes=[ROUTE], worker=WORKER)
    async with running_inbox(config) as inbox:
        body, headers = delivery("evt_numbers")
        assert (await client.post(inbox.url(), content=body, headers=headers)).status_code == 200
        await _dead_after(inbox.store, "evt_numbers", 2)
        found = await inbox.store.journal.get_delivery("evt_numbers")
        assert found is not None
        job_id = found.jobs[0].id

        _cli(config_path, "replay", found.id)
        await _dead_after(inbox.store, "evt_numbers", 4)
        _cli(config_path, "dlq", "retry", job_id)
        await _dead_after(inbox.store, "evt_numbers", 6)

        (traced,) = _cli(config_path, "trace", "evt_numbers")["deliveries"]
        answer = await client.get(
            f"{inbox.base_url}/api/v1/deliveries/{found.id}",
            headers={"authorization": f"Bearer {TOKEN}"},
        )
        assert answer.status_code == 200, answer.text

    expected = [
        (1, "delivery"),
        (2, "delivery"),
        (3, "replay"),
        (4, "replay"),
        (5, "dlq-retry"),
        (6, "dlq-retry"),
    ]
    (cli_job,) = traced["jobs"]
    (api_job,) = answer.json()["jobs"]
    for job in (cli_job, api_job):
        assert _numbers(job) == expected
        # Each requeue granted the route's two attempts on top of those spent.
        assert (job["attempts"], job["max_attempts"]) == (6, 6)
