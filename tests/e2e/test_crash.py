"""A worker process killed with SIGKILL at each point of an effect: once its lease expires
another worker finishes the job, and the external system sees exactly one effect."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.configs import write_config
from tests.support.external import ExternalSystem
from tests.support.inbox import make_config, running_inbox
from tests.support.processes import HookinboxProcess, hookinbox_env, wait_until
from tests.support.signing import delivery
from tests.support.waiting import wait_for_status

ROUTE = {
    "events": ["*"],
    "action": "crm",
    "handler": "tests.support.handlers:crm_task_via_external",
}


@pytest.mark.slow
@pytest.mark.parametrize("kill_point", ["before_call", "after_call", "after_record"])
async def test_worker_killed_mid_job_another_finishes_with_one_effect(
    db_url: str, tmp_path: Path, client: httpx.AsyncClient, kill_point: str
) -> None:
    config_path = write_config(tmp_path / "hookinbox.toml", db_url, routes=[ROUTE])
    marker = tmp_path / "reached"
    with ExternalSystem() as external:
        env = {"HB_TEST_EXTERNAL_URL": external.url}
        doomed = HookinboxProcess(
            ["worker", "--config", str(config_path)],
            hookinbox_env({**env, "HB_TEST_KILL_POINT": kill_point, "HB_TEST_MARKER": str(marker)}),
            tmp_path / "doomed.log",
        )
        survivor = HookinboxProcess(
            ["worker", "--config", str(config_path)], hookinbox_env(env), tmp_path / "survivor.log"
        )
        # Receive in this process; work only in the child processes.
        async with running_inbox(make_config(db_url, routes=[ROUTE]), run_workers=False) as inbox:
            body, headers = delivery("evt_crash")
            answer = await client.post(inbox.url(), content=body, headers=headers)
            assert answer.json()["status"] == "accepted"
            doomed.start()
            try:
                wait_until(marker.exists, 30, f"the worker to reach {kill_point}")
                doomed.kill()
                survivor.start()

                await wait_for_status(inbox.store, "evt_crash", "completed", 30)
            finally:
                doomed.stop()
                survivor.stop()
            found = await inbox.store.journal.get_delivery("evt_crash")
            assert found is not None
            (job,) = found.jobs
            attempts = await inbox.store.queue.list_attempts(job.id)
            effect = await inbox.store.effects.get_effect("crm-task:evt_crash:create")
    assert external.count() == 1, survivor.output()[-3000:]
    assert job.attempts == 2
    assert [a.outcome for a in attempts] == ["lease_expired", "completed"]
    assert effect is not None and effect.state == "recorded"
    assert job.business_id == external.effects[0]["id"] == effect.result["id"]
