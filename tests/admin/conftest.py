"""The admin tests: an inbox with the admin on, and Debian's Chromium driven by Playwright.

Playwright never downloads a browser here: it launches ``/usr/bin/chromium`` (the Makefile
installs Debian's ``chromium`` package when it is missing, scripts/ensure-chromium.sh).
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.admin import handlers
from tests.conftest import make_config

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


@pytest.fixture(autouse=True)
def _admin_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKINBOX_ADMIN_TOKEN", TOKEN)
    handlers.FIXED.clear()


def admin_config(db_url: str, **sections: Any) -> Any:
    """Two sources: ``test`` (a flaky handler, one attempt) and ``other``."""
    config = make_config(db_url, routes=[FLAKY_ROUTE], worker={"max_attempts": 1}, **sections)
    other = config.sources["test"].model_copy()
    return config.model_copy(update={"sources": {**config.sources, "other": other}})


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Path:
    """Screenshots of this test: test-output/admin/<test name>/."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    folder = REPO / "test-output" / "admin" / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def chromium() -> str:
    assert os.path.exists(CHROMIUM), f"{CHROMIUM} is missing: run scripts/ensure-chromium.sh"
    return CHROMIUM


@pytest.fixture
async def browser(chromium: str) -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        launched = await p.chromium.launch(
            executable_path=chromium, args=CHROMIUM_ARGS, headless=True, timeout=30_000
        )
        try:
            yield launched
        finally:
            await launched.close()


async def login(client: httpx.AsyncClient, base_url: str) -> None:
    answer = await client.post(
        f"{base_url}/admin/login", data={"token": TOKEN, "name": "tester"}, follow_redirects=False
    )
    assert answer.status_code == 303, answer.text[:500]
