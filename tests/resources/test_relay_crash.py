"""The notification worker is killed (SIGKILL, a real ``hookinbox worker``) while sending:
after a restart the notification goes out again under the same key, and the receiving
service, which handles each Idempotency-Key once, acts on it exactly once."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.resources.support import NotifyService, video_event, video_route
from tests.support.inbox import make_config, running_inbox
from tests.support.processes import HookinboxProcess, hookinbox_env, wait_until
from tests.support.signing import SECRET_ENV
from tests.support.waiting import wait_for

CONFIG = """
database = "{db_url}"
[worker]
concurrency = 2
max_attempts = 5
lease_seconds = 2
poll_interval_seconds = 0.2
[outbox]
forward = "{notify_url}"
lease_seconds = 2
poll_interval_seconds = 0.1
backoff_base_seconds = 0.1
backoff_max_seconds = 0.5
timeout_seconds = 60
[sources.test]
scheme = "standard-webhooks"
secret_env = "{secret_env}"
[[sources.test.routes]]
events = ["video.*"]
action = "video"
[sources.test.routes.resource]
kind = "video"
ref = "/data/task_id"
tenant = "/data/tenant_id"
"""


@pytest.mark.slow
async def test_relay_killed_mid_send_sends_once_by_key_after_restart(
    db_url: str, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    with NotifyService(hang_first=True) as notify:
        config_path = tmp_path / "hookinbox.toml"
        config_path.write_text(
            CONFIG.format(db_url=db_url, notify_url=notify.url, secret_env=SECRET_ENV)
        )
        doomed = HookinboxProcess(
            ["worker", "--config", str(config_path)], hookinbox_env(), tmp_path / "doomed.log"
        )
        survivor = HookinboxProcess(
            ["worker", "--config", str(config_path)], hookinbox_env(), tmp_path / "survivor.log"
        )
        config = make_config(db_url, routes=[video_route()])
        async with running_inbox(config, run_workers=False) as inbox:
            task = await inbox.inbox.resources.create(
                "video", tenant="acme", owner="user-1", provider_ref="prov-1"
            )
            key = f"video-ready:{task.id}"
            body, headers = video_event("evt_ready", "ready", "prov-1")
            answer = await client.post(inbox.url(), content=body, headers=headers)
            assert answer.json()["status"] == "accepted"
            doomed.start()
            try:
                wait_until(lambda: len(notify.requests) == 1, 30, "the relay to start sending")
                doomed.kill()  # mid-send: the service has the request, the row is not marked
                row = await inbox.store.outbox.get_outbox(key)
                assert row is not None and row.state == "sending"
                survivor.start()

                async def sent() -> bool:
                    row = await inbox.store.outbox.get_outbox(key)
                    return row is not None and row.state == "sent"

                await wait_for(sent, 30, "the restarted relay to send")
            finally:
                doomed.stop()
                survivor.stop()
            row = await inbox.store.outbox.get_outbox(key)
            resource = await inbox.store.resources.get_resource(task.id)
    assert row is not None and row.attempts == 2
    assert notify.keys() == {key: 2}  # sent again after the crash, under the same key
    assert notify.handled == {key: 1}  # and acted on once
    assert resource is not None and resource.state == "ready"
