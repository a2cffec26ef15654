"""What each attempt keeps (issue 12, timeline detail): the target (a forward's host and
path, or the handler), the HTTP status or the error code, a bounded snippet of the
target's answer (never the payload sent), the duration and the next attempt's time; shown
in the admin's timeline to the millisecond and by ``trace`` and ``deliveries show``. Both
stores, against a real local HTTP target."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookinbox.config import Config
from hookinbox.store import AttemptView
from tests.admin.support import TOKEN, login
from tests.support.configs import write_config
from tests.support.inbox import make_config, running_inbox
from tests.support.processes import REPO, free_port, hookinbox_env
from tests.support.signing import delivery
from tests.support.target import Answer, RecordingTarget
from tests.support.waiting import wait_for_status


def _config(db_url: str, url: str) -> Config:
    route = {"events": ["*"], "action": "relay", "forward": url, "forward_timeout_seconds": 2}
    return make_config(
        db_url, routes=[route], worker={"max_attempts": 2, "backoff_base_seconds": 0.2}
    )


async def _attempts(
    db_url: str, client: httpx.AsyncClient, event_id: str, answers: list[Answer], state: str
) -> tuple[list[AttemptView], RecordingTarget, bytes]:
    body, headers = delivery(event_id, secret_note="payload-only-text")
    with RecordingTarget(statuses=answers) as target:
        async with running_inbox(_config(db_url, target.url + "?token=abc")) as inbox:
            await client.post(inbox.url(), content=body, headers=headers)
            await wait_for_status(inbox.store, event_id, state)
            found = await inbox.store.journal.get_delivery(event_id)
            assert found is not None
            return await inbox.store.queue.list_attempts(found.jobs[0].id), target, body


async def test_each_attempt_keeps_its_target_status_answer_duration_and_next_time(
    db_url: str, client: httpx.AsyncClient
) -> None:
    busy = (503, {}, b"upstream busy\r\n\x1b[0m")
    (failed, done), target, _ = await _attempts(db_url, client, "evt_detail", [busy], "completed")
    host_path = target.url.removeprefix("http://")
    assert (failed.outcome, failed.error_code, failed.http_status) == ("retry", "http_503", 503)
    assert failed.target == host_path  # host and path: never the query's token
    assert failed.response_snippet == "upstream busy [0m"
    assert failed.duration_ms is not None and 0 <= failed.duration_ms < 2000
    assert failed.ended_at is not None and failed.next_attempt_at is not None
    assert failed.next_attempt_at > failed.ended_at
    assert (done.outcome, done.http_status, done.target) == ("completed", 200, host_path)
    assert done.response_snippet == '{"id": "internal-2"}'
    assert done.next_attempt_at is None


async def test_a_snippet_is_bounded_and_never_the_payload_sent(
    db_url: str, client: httpx.AsyncClient
) -> None:
    long = (500, {}, b"x" * 5000)
    (first, _), _, body = await _attempts(db_url, client, "evt_long", [long], "completed")
    assert first.response_snippet == "x" * 512
    assert b"payload-only-text" in body
    assert "payload-only-text" not in json.dumps(first.as_json())


async def test_a_forward_that_never_connected_shows_its_error_and_no_status(
    db_url: str, client: httpx.AsyncClient
) -> None:
    body, headers = delivery("evt_refused")
    url = f"http://127.0.0.1:{free_port()}/down"
    async with running_inbox(_config(db_url, url)) as inbox:
        await client.post(inbox.url(), content=body, headers=headers)
        await wait_for_status(inbox.store, "evt_refused", "failed")
        found = await inbox.store.journal.get_delivery("evt_refused")
        assert found is not None
        attempts = await inbox.store.queue.list_attempts(found.jobs[0].id)
    assert [(a.outcome, a.error_code, a.http_status) for a in attempts] == [
        ("retry", "connect_error", None),
        ("failed", "connect_error", None),
    ]
    assert {a.target for a in attempts} == {url.removeprefix("http://")}


async def test_a_handler_attempt_names_the_handler(db_url: str, client: httpx.AsyncClient) -> None:
    body, headers = delivery("evt_handler")
    async with running_inbox(make_config(db_url)) as inbox:
        await client.post(inbox.url(), content=body, headers=headers)
        await wait_for_status(inbox.store, "evt_handler", "completed")
        found = await inbox.store.journal.get_delivery("evt_handler")
        assert found is not None
        (attempt,) = await inbox.store.queue.list_attempts(found.jobs[0].id)
    assert attempt.target == "tests.support.handlers:count"
    assert attempt.http_status is None and attempt.duration_ms is not None


async def test_the_admin_timeline_shows_the_detail_to_the_millisecond(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKINBOX_ADMIN_TOKEN", TOKEN)
    body, headers = delivery("evt_admin_detail")
    with RecordingTarget(statuses=[(502, {}, b"<b>bad gateway</b>")]) as target:
        config = _config(sqlite_url, target.url)
        async with running_inbox(config) as inbox, httpx.AsyncClient() as client:
            await client.post(inbox.url(), content=body, headers=headers)
            await wait_for_status(inbox.store, "evt_admin_detail", "completed")
            found = await inbox.store.journal.get_delivery("evt_admin_detail")
            assert found is not None
            await login(client, inbox.base_url)
            page = (await client.get(f"{inbox.base_url}/admin/deliveries/{found.id}")).text
    assert "&lt;b&gt;bad gateway&lt;/b&gt;" in page and "<b>bad gateway" not in page
    assert target.url.removeprefix("http://") in page
    assert '<dd class="fact-status">502</dd>' in page
    assert "<dt>next</dt>" in page and " ms</dd>" in page
    assert "started, not recorded" not in page  # the forward's effect was recorded
    assert re.search(r'title="[0-9-]{10} \d\d:\d\d:\d\d\.\d{3} UTC"', page)  # to the ms


async def test_trace_and_deliveries_show_print_the_detail(
    tmp_path: Path, db_url: str, client: httpx.AsyncClient
) -> None:
    body, headers = delivery("evt_cli_detail")
    with RecordingTarget(statuses=[(429, {}, b"too many")]) as target:
        async with running_inbox(_config(db_url, target.url)) as inbox:
            await client.post(inbox.url(), content=body, headers=headers)
            await wait_for_status(inbox.store, "evt_cli_detail", "completed")
        route = {"events": ["*"], "action": "relay", "forward": target.url}
        config = write_config(tmp_path / "h.toml", db_url, routes=[route])

        def cli(*args: str) -> str:
            done = subprocess.run(
                [sys.executable, "-m", "hookinbox.cli", *args, "--config", str(config)],
                env=hookinbox_env({}),
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=90,
                check=True,
            )
            return done.stdout

        for printed in (
            cli("trace", "evt_cli_detail"),
            cli("deliveries", "show", "evt_cli_detail"),
        ):
            assert "retry  http_429  status=429" in printed
            assert f"target={target.url.removeprefix('http://')}" in printed
            assert "answer='too many'" in printed and "next=" in printed
        shown: dict[str, Any] = json.loads(cli("deliveries", "show", "evt_cli_detail", "--json"))
        first = shown["jobs"][0]["attempt_history"][0]
        assert (first["http_status"], first["response_snippet"]) == (429, "too many")


async def test_the_timeline_shows_a_forward_that_never_connected_as_not_made(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing was made at the target: the page shows the attempts' connect_error and
    their target, and no effect row as if one had been made."""
    monkeypatch.setenv("HOOKINBOX_ADMIN_TOKEN", TOKEN)
    body, headers = delivery("evt_never_connected")
    config = _config(sqlite_url, f"http://127.0.0.1:{free_port()}/down")
    async with running_inbox(config) as inbox, httpx.AsyncClient() as client:
        await client.post(inbox.url(), content=body, headers=headers)
        await wait_for_status(inbox.store, "evt_never_connected", "failed")
        found = await inbox.store.journal.get_delivery("evt_never_connected")
        assert found is not None
        await login(client, inbox.base_url)
        page = (await client.get(f"{inbox.base_url}/admin/deliveries/{found.id}")).text
    assert page.count("connect_error") >= 2
    assert ">started<" not in page and "tl-effect" not in page
