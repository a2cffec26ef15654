"""A worker process SIGKILLed while its two forwards to a ``max_in_flight = 2`` destination
are at the target: the worker that claims the jobs again waits until the dead worker's
slots run out (the forward's timeout and a margin), so the target never serves more than
two at once, though the dead worker's requests are still being served when the leases
expire."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from hookinbox.work.destination_gate import SLOT_MARGIN_SECONDS
from tests.support.configs import write_config
from tests.support.inbox import make_config, running_inbox
from tests.support.processes import HookinboxProcess, hookinbox_env, wait_until
from tests.support.signing import delivery
from tests.support.target import RecordingTarget
from tests.support.waiting import wait_for_status

ROUTE = {"events": ["*"], "action": "slow", "destination": "slow"}
TIMEOUT = 2.0
#: The dead worker's forwards are served until just before their slots run out (it died
#: long before their timeout); the later ones (the target is quick again) well within it.
DEAD_FORWARD_SECONDS = TIMEOUT + SLOT_MARGIN_SECONDS - 1.0
WORKER = {"lease_seconds": 1, "poll_interval_seconds": 0.1, "concurrency": 4}


@pytest.mark.slow
async def test_a_dead_workers_slots_hold_while_its_jobs_are_claimed_again(
    db_url: str, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    with RecordingTarget(delay=0.1, delays=[DEAD_FORWARD_SECONDS] * 2) as target:
        destination = {"url": target.url, "max_in_flight": 2, "timeout_seconds": TIMEOUT}
        extra = "[destinations.slow]\n" + "".join(
            f"{k} = {v!r}\n".replace("'", '"') for k, v in destination.items()
        )
        config_path = write_config(
            tmp_path / "hookinbox.toml", db_url, routes=[ROUTE], worker=WORKER, extra=extra
        )
        config = make_config(db_url, routes=[ROUTE], destinations={"slow": destination})
        doomed = HookinboxProcess(
            ["worker", "--config", str(config_path)], hookinbox_env(), tmp_path / "doomed.log"
        )
        survivor = HookinboxProcess(
            ["worker", "--config", str(config_path)], hookinbox_env(), tmp_path / "survivor.log"
        )
        async with running_inbox(config, run_workers=False) as inbox:
            for n in range(2):
                body, headers = delivery(f"evt_slot_{n}")
                answer = await client.post(inbox.url(), content=body, headers=headers)
                assert answer.json()["status"] == "accepted"
            doomed.start()
            try:
                wait_until(lambda: target.in_flight == 2, 30, "both forwards at the target")
                # Killed well within the forwards' timeout: they are still under way.
                doomed.kill()
                survivor.start()
                for n in range(2):
                    await wait_for_status(inbox.store, f"evt_slot_{n}", "completed", 30)
            finally:
                doomed.stop()
                survivor.stop()
    assert len(target.requests) == 4, survivor.output()[-3000:]
    assert target.max_in_flight == 2, survivor.output()[-4000:]
