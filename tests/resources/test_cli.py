"""``hookinbox resources`` / ``outbox`` / ``replay --outbox`` through the real command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from tests.resources.support import NotifyService, outbox_settings, video_event, video_route
from tests.support.inbox import make_config, running_inbox
from tests.support.processes import REPO, hookinbox_env
from tests.support.waiting import wait_for


def hookinbox(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookinbox.cli", *args, "--config", str(config)],
        env=hookinbox_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_resources_create_attach_show_list(db_url: str, tmp_path: Path) -> None:
    config = tmp_path / "hookinbox.toml"
    config.write_text(f'database = "{db_url}"\n')
    # Operator commands open only an existing store (issue 12): make it first.
    assert hookinbox(config, "migrate").returncode == 0
    made = hookinbox(
        config, "resources", "create", "video", "--tenant", "acme", "--owner", "u1", "--json"
    )
    assert made.returncode == 0, made.stderr
    resource = json.loads(made.stdout)
    assert (resource["state"], resource["provider_ref"]) == ("submitted", None)
    rid = resource["resource_id"]

    attached = hookinbox(config, "resources", "attach", rid, "prov-1", "--json")
    assert json.loads(attached.stdout)["provider_ref"] == "prov-1"
    taken = hookinbox(
        config, "resources", "create", "video", "--tenant", "t", "--owner", "o", "--ref", "prov-1"
    )
    assert taken.returncode == 5 and "refused" in taken.stderr

    shown = json.loads(hookinbox(config, "resources", "show", rid, "--json").stdout)
    assert [t["outcome"] for t in shown["transitions"]] == ["created", "attached"]
    listed = json.loads(hookinbox(config, "resources", "list", "--tenant", "acme", "--json").stdout)
    assert [r["resource_id"] for r in listed] == [rid]
    assert hookinbox(config, "resources", "show", "res_nope").returncode == 4
    assert (
        hookinbox(
            config, "resources", "create", "audio", "--tenant", "t", "--owner", "o"
        ).returncode
        == 2
    )
    assert hookinbox(config, "outbox", "show", "video-ready:res_nope").returncode == 4
    assert json.loads(hookinbox(config, "outbox", "list", "--json").stdout) == []


async def test_replay_outbox_resends_the_existing_row_without_touching_the_resource(
    db_url: str, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    config_file = tmp_path / "hookinbox.toml"
    config_file.write_text(f'database = "{db_url}"\n')
    with NotifyService() as notify:
        config = make_config(db_url, routes=[video_route()], outbox=outbox_settings(notify.url))
        async with running_inbox(config) as inbox:
            task = await inbox.inbox.resources.create(
                "video", tenant="acme", owner="u1", provider_ref="prov-1"
            )
            key = f"video-ready:{task.id}"
            body, headers = video_event("evt_ready", "ready", "prov-1", owner="u1")
            await client.post(inbox.url(), content=body, headers=headers)

            async def sent() -> bool:
                row = await inbox.store.outbox.get_outbox(key)
                return row is not None and row.state == "sent"

            await wait_for(sent, 10, "the notification")
            refused = hookinbox(config_file, "outbox", "retry", key)  # not a dead letter
            assert refused.returncode == 5
            replayed = hookinbox(config_file, "replay", "--outbox", key)
            assert replayed.returncode == 0, replayed.stderr
            await wait_for(lambda: _requests(notify, 2), 10, "the notification again")
            resource = await inbox.store.resources.get_resource(task.id)
            log = await inbox.inbox.resources.transitions(task.id)
            shown = json.loads(hookinbox(config_file, "outbox", "show", key, "--json").stdout)
    assert notify.keys() == {key: 2} and notify.handled == {key: 1}  # same key both times
    assert resource is not None and (resource.state, resource.version) == ("ready", 2)
    assert [t.outcome for t in log] == ["created", "applied"]
    assert shown["state"] == "sent" and shown["body"]["resource_id"] == task.id


async def _requests(notify: NotifyService, count: int) -> bool:
    return len(notify.requests) >= count
