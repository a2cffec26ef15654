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

import pytest

from tests.admin import handlers
from tests.admin.support import CHROMIUM, CHROMIUM_ARGS, REPO, TOKEN


@pytest.fixture(autouse=True)
def _admin_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKINBOX_ADMIN_TOKEN", TOKEN)
    handlers.FIXED.clear()


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
