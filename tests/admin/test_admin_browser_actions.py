"""Issue 12, item 1, in Chromium: pressing Enter in the dead letters' Limit field never
retries a row, and reloading the page an action led to never repeats the action."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.admin.support import admin_config
from tests.admin.test_admin_browser import log_in, shoot
from tests.admin.test_admin_post_redirect_get import commands, dead_letter
from tests.support.inbox import running_inbox

pytestmark = pytest.mark.slow


async def test_enter_in_the_limit_field_never_retries_a_row(
    sqlite_url: str, browser: Any, shots: Path
) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        for n in range(2):
            await dead_letter(inbox, client, f"evt_enter_{n}")
        page = await browser.new_page()
        base = inbox.base_url
        await log_in(page, base, shots)
        await page.goto(f"{base}/admin/dead-letters")
        # Nothing ticked: Enter in the limit field.
        await page.fill("#limit", "1")
        await page.press("#limit", "Enter")
        await page.wait_for_load_state()
        await shoot(page, shots, "02-enter-nothing-selected")
        assert await commands(inbox, "dlq-retry") == 0
        assert len(await inbox.store.queue.list_dead_letters()) == 2
        # One ticked: Enter leads to the confirmation, never to a retry.
        await page.goto(f"{base}/admin/dead-letters")
        await page.locator("input.pick").first.check()
        await page.press("#limit", "Enter")
        await page.wait_for_url(f"{base}/admin/dead-letters/confirm?**")
        assert "Retry 1 dead letter?" in await page.inner_text("h1")
        await shoot(page, shots, "03-enter-one-selected")
        assert await commands(inbox, "dlq-retry") == 0
        assert len(await inbox.store.queue.list_dead_letters()) == 2
        await page.close()


async def test_reloading_the_page_after_a_retry_does_not_retry_again(
    sqlite_url: str, browser: Any, shots: Path
) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        job_id = await dead_letter(inbox, client, "evt_reload")
        page = await browser.new_page()
        base = inbox.base_url
        await log_in(page, base, shots)
        await page.goto(f"{base}/admin/dead-letters")
        button = page.get_by_role("button", name=f"Retry job {job_id}")
        assert await button.count() == 1
        await button.click()
        assert "retried" in await page.inner_text("#flash")
        assert "/admin/dead-letters?" in page.url  # back on the list, with the outcome
        for _ in range(2):
            await page.reload()
            assert "retried" in await page.inner_text("#flash")
        await shoot(page, shots, "02-after-reloads")
        audit = await inbox.store.audit.list_operator_actions()
        assert [a.command for a in audit].count("dlq-retry") == 1
        await page.close()
