"""The version is written once and shown by ``--version``, ``__version__`` and the
``hookinbox_build_info`` metric; ``hookinbox.asgi.mount`` serves an inbox beside an ASGI
app that has no mounts or lifespan of its own."""

from __future__ import annotations

import platform
import subprocess
import sys
from typing import Any

import httpx
import pytest

import hookinbox
from hookinbox.app import Inbox
from hookinbox.asgi import mount
from hookinbox.version import __version__
from tests.support.inbox import make_config, serving
from tests.support.signing import delivery
from tests.support.waiting import wait_for_status


def test_the_version_is_the_same_everywhere() -> None:
    from importlib.metadata import version

    assert hookinbox.__version__ == __version__ == version("hookinbox")
    shown = subprocess.run(
        [sys.executable, "-m", "hookinbox.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert shown.stdout.strip() == f"hookinbox, version {__version__}"


async def test_metrics_show_the_build(sqlite_url: str, client: httpx.AsyncClient) -> None:
    inbox = Inbox(make_config(sqlite_url), run_workers=False)
    async with serving(inbox.app) as base:
        text = (await client.get(f"{base}/metrics")).text
    line = (
        f'hookinbox_build_info{{python="{platform.python_version()}",version="{__version__}"}} 1.0'
    )
    assert line in text


async def _plain_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app like Django's: http only, no lifespan."""
    assert scope["type"] == "http", "no lifespan here"
    body = f"app saw {scope['path']}".encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


async def test_mount_serves_the_inbox_under_a_prefix_and_the_rest_from_the_app(
    sqlite_url: str, client: httpx.AsyncClient
) -> None:
    inbox = Inbox(make_config(sqlite_url))
    async with serving(mount(_plain_app, inbox, prefix="/hooks/")) as base:
        body, headers = delivery("evt_asgi")
        answer = await client.post(f"{base}/hooks/webhooks/test", content=body, headers=headers)
        assert answer.json()["status"] == "accepted"
        assert (await client.get(f"{base}/hooks/healthz")).status_code == 200
        assert (await client.get(f"{base}/hooksmith")).text == "app saw /hooksmith"
        assert (await client.get(f"{base}/")).text == "app saw /"
        await wait_for_status(inbox.store, "evt_asgi", "completed")


def test_mount_needs_a_prefix() -> None:
    with pytest.raises(ValueError, match="prefix"):
        mount(_plain_app, object(), prefix="/")  # type: ignore[arg-type]
