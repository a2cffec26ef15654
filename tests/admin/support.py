"""What the admin tests share: the token, a config with the admin on, logging in."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.support.inbox import make_config
from tests.support.processes import HookinboxProcess, free_port, hookinbox_env

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "admin-token-for-tests-0123456789"
REPO = Path(__file__).resolve().parents[2]

FLAKY_ROUTE = {"events": ["*"], "action": "crm", "handler": "tests.admin.handlers:flaky"}


def admin_config(db_url: str, **sections: Any) -> Any:
    """Two sources: ``test`` (a flaky handler, one attempt) and ``other``."""
    config = make_config(db_url, routes=[FLAKY_ROUTE], worker={"max_attempts": 1}, **sections)
    other = config.sources["test"].model_copy()
    return config.model_copy(update={"sources": {**config.sources, "other": other}})


async def login(client: httpx.AsyncClient, base_url: str) -> None:
    answer = await client.post(
        f"{base_url}/admin/login", data={"token": TOKEN, "name": "tester"}, follow_redirects=False
    )
    assert answer.status_code == 303, answer.text[:500]


@contextlib.contextmanager
def serving(tmp_path: Path, server: str = "") -> Iterator[tuple[int, HookinboxProcess]]:
    """A real ``hookinbox serve`` (SQLite, no workers, the admin token set) on a free port
    of 127.0.0.1, healthy; ``server``: more ``[server]`` lines."""
    port = free_port()
    config = tmp_path / "c.toml"
    config.write_text(
        f'database = "sqlite:///{tmp_path}/h.db"\n'
        f'[server]\nhost = "127.0.0.1"\nport = {port}\n{server}'
    )
    process = HookinboxProcess(
        ["serve", "--config", str(config), "--no-workers"],
        hookinbox_env({"HOOKINBOX_ADMIN_TOKEN": TOKEN}),
        tmp_path / "serve.log",
    ).start()
    try:
        process.wait_healthy(f"http://127.0.0.1:{port}", timeout=30)
        yield port, process
    finally:
        process.stop()
