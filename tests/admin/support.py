"""What the admin tests share: the token, a config with the admin on, logging in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.support.inbox import make_config

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
