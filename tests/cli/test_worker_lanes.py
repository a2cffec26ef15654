"""``hookinbox worker`` wider than one claim batch, in a subprocess, on both stores: its
lanes make every effect once, and a claim batch out of bounds is one line naming it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from hookinbox.store import Store
from tests.support.configs import write_config
from tests.support.external import ExternalSystem
from tests.support.journal import add_delivery
from tests.support.processes import REPO, HookinboxProcess, hookinbox_env
from tests.support.signing import SECRET, SECRET_ENV
from tests.support.waiting import wait_for

CRM = {"events": ["*"], "action": "crm", "handler": "tests.support.handlers:crm_task_via_external"}
JOBS = 30


async def test_a_worker_of_three_lanes_makes_each_effect_once(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    config = write_config(
        tmp_path / "hookinbox.toml",
        db_url,
        routes=[CRM],
        worker={"concurrency": 6, "claim_batch": 2},
    )
    ids = [f"evt_lane_{n}" for n in range(JOBS)]
    for event_id in ids:
        await add_delivery(store, event_id, actions=("crm",))
    with ExternalSystem() as external:
        worker = HookinboxProcess(
            ["worker", "--config", str(config)],
            hookinbox_env({"HB_TEST_EXTERNAL_URL": external.url}),
            tmp_path / "worker.log",
        ).start()
        try:

            async def all_completed() -> bool:
                for event_id in ids:
                    found = await store.journal.get_delivery(event_id)
                    if found is None or found.status != "completed":
                        return False
                return True

            await wait_for(all_completed, 60, "the worker to complete every job")
        finally:
            worker.stop()
        keys = Counter(effect["key"] for effect in external.effects)
    assert len(keys) == JOBS and set(keys.values()) == {1}
    lines = [json.loads(ln) for ln in worker.log_path.read_text().splitlines() if ln[:1] == "{"]
    (started,) = [line for line in lines if line["event"] == "worker_started"]
    assert (started["concurrency"], started["lanes"]) == (6, 3)


def test_a_claim_batch_out_of_bounds_is_one_line_naming_it(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "hookinbox.toml",
        "sqlite:///" + str(tmp_path / "h.db"),
        routes=[CRM],
        worker={"claim_batch": 0},
    )
    result = subprocess.run(
        [sys.executable, "-m", "hookinbox.cli", "worker", "--config", str(config)],
        env=hookinbox_env({SECRET_ENV: SECRET}),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "worker.claim_batch" in line
