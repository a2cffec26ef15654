"""The admin in a real browser (Debian's Chromium under Playwright), on both stores.

Each scenario saves a screenshot of every page it visits under
test-output/admin/<test name>/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.admin import handlers
from tests.admin.support import TOKEN, admin_config
from tests.support.inbox import running_inbox
from tests.support.signing import delivery
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow


async def shoot(page: Any, shots: Path, name: str) -> None:
    await page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


async def log_in(page: Any, base: str, shots: Path) -> None:
    await page.goto(f"{base}/admin/")
    assert "/admin/login" in page.url
    await page.fill("input[name=name]", "ana")
    await page.fill("input[name=token]", TOKEN)
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{base}/admin/")
    await shoot(page, shots, "01-overview")


async def test_find_a_failed_delivery_fix_the_handler_retry_it_see_it_completed(
    sqlite_url: str, browser: Any, shots: Path
) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        for event_id in ("evt_ok_1", "evt_ok_2"):
            handlers.FIXED.add(event_id)
            body, headers = delivery(event_id)
            await client.post(inbox.url(), content=body, headers=headers)
        body, headers = delivery("evt_broken", "crm.deal.won", amount=12)
        assert (await client.post(inbox.url(), content=body, headers=headers)).status_code == 200
        for _ in range(2):  # duplicates and a refusal, for the overview
            await client.post(inbox.url(), content=body, headers=headers)
        await client.post(
            inbox.url(), content=body, headers={**headers, "webhook-signature": "v1,x"}
        )

        async def failed() -> bool:
            found = await inbox.store.journal.get_delivery("evt_broken")
            return found is not None and found.status == "failed"

        await wait_for(failed, 15, "evt_broken to dead-letter")

        page = await browser.new_page()
        base = inbox.base_url
        await log_in(page, base, shots)
        row = page.locator("#sources tr[data-source=test]")
        assert await row.locator("td.accepted").inner_text() == "3"
        assert await row.locator("td.duplicate").inner_text() == "2"
        assert await row.locator("td.rejected").inner_text() == "1"
        assert await page.locator("#chart rect.accepted").count() >= 1

        await page.click("text=Deliveries")
        await page.fill("input[name=ref]", "evt_broken")
        await page.click("#search button[type=submit]")
        results = page.locator("#deliveries tr[data-event-id]")
        assert await results.count() == 1
        assert await results.locator("td.status-failed").inner_text() == "failed"
        await shoot(page, shots, "02-deliveries-search")

        await results.locator("a").first.click()
        assert await page.inner_text("#status") == "failed"
        assert "crm_down" in await page.inner_text("#timeline")
        assert await page.locator("#payload").count() == 0
        await shoot(page, shots, "03-delivery-failed")

        await page.click("#show-payload")
        assert '"amount": 12' in await page.inner_text("#payload")
        assert "logged" in await page.inner_text("main")
        await shoot(page, shots, "04-payload-shown")

        handlers.FIXED.add("evt_broken")  # the handler is fixed
        await page.click("#jobs button.retry")
        assert "retried" in await page.inner_text("#flash")

        async def completed() -> bool:
            await page.reload()
            return bool(await page.inner_text("#status") == "completed")

        await wait_for(completed, 15, "the retried job to complete", step=0.3)
        timeline = await page.inner_text("#timeline")
        assert "dlq-retry" in timeline and "completed" in timeline
        await shoot(page, shots, "05-delivery-completed")

        # Replay runs the job again through the workers (the ledger still applies).
        await page.click("#replay")
        assert "replayed" in await page.inner_text("#flash")

        async def replayed() -> bool:
            await page.reload()
            timeline = await page.inner_text("#timeline")
            return "(replay)" in timeline and await page.inner_text("#status") == "completed"

        await wait_for(replayed, 15, "the replayed job to complete", step=0.3)
        await shoot(page, shots, "06-replayed")

        audit = await inbox.store.audit.list_operator_actions()
        assert {(a.command, a.actor) for a in audit} >= {
            ("view-payload", "admin:ana"),
            ("dlq-retry", "admin:ana"),
        }
        await page.close()


async def test_retry_selected_dead_letters_after_a_confirmation(
    sqlite_url: str, browser: Any, shots: Path
) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        for n in range(3):
            body, headers = delivery(f"evt_dead_{n}")
            await client.post(inbox.url(), content=body, headers=headers)

        async def all_failed() -> bool:
            found = await inbox.store.queue.list_dead_letters()
            return len(found) == 3

        await wait_for(all_failed, 15, "three dead letters")
        page = await browser.new_page()
        base = inbox.base_url
        await log_in(page, base, shots)
        await page.click("text=Dead letters")
        assert "crm_down" in await page.inner_text("#reasons")
        handlers.FIXED.add("evt_dead_0")
        await page.click("#dead tr:has-text('evt_dead_0') button.retry-one")
        assert "retried" in await page.inner_text("#flash")

        async def two_left() -> bool:
            return len(await inbox.store.queue.list_dead_letters()) == 2

        await wait_for(two_left, 15, "the one retried dead letter to complete")
        await page.click("text=Dead letters")
        await page.check("#select-all")
        await shoot(page, shots, "02-dead-letters-selected")
        await page.fill("input[name=limit]", "1")
        await page.click("#retry-selected")
        assert "more than the limit of 1" in await page.inner_text("#error")
        await page.go_back()
        handlers.FIXED.add("*")
        await page.fill("input[name=limit]", "3")
        await page.check("#select-all")
        await page.click("#retry-selected")
        assert "Retry 2 dead letters?" in await page.inner_text("h1")
        await shoot(page, shots, "03-confirm")
        assert (
            len(await inbox.store.queue.list_dead_letters()) == 2
        )  # nothing before the confirmation
        await page.click("#confirm")
        assert "2 requeued" in await page.inner_text("#flash")
        assert page.url.startswith(f"{base}/admin/dead-letters?")
        await shoot(page, shots, "04-retried")

        async def none_left() -> bool:
            return not await inbox.store.queue.list_dead_letters()

        await wait_for(none_left, 15, "the retried jobs to complete")
        await page.close()


async def test_pause_and_resume_a_source(sqlite_url: str, browser: Any, shots: Path) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        page = await browser.new_page()
        base = inbox.base_url
        await log_in(page, base, shots)
        await page.click("text=Sources")
        row = page.locator("#sources tr[data-source=test]")
        await row.locator("input[name=reason]").fill("provider changed its contract")
        await row.locator("button.pause").click()
        assert "paused" in await page.inner_text("#flash")
        assert "provider changed its contract" in await row.locator("td.state").inner_text()
        await shoot(page, shots, "02-paused")

        async def answers(status: int) -> bool:
            body, headers = delivery("evt_while_paused")
            answer = await client.post(inbox.url(), content=body, headers=headers)
            return answer.status_code == status

        await wait_for(lambda: answers(503), 10, "the paused source to answer 503", step=0.2)

        async def paused_gauge() -> bool:
            metrics = (await client.get(f"{base}/metrics")).text
            return 'hookinbox_source_paused{source="test"} 1.0' in metrics

        # The store gauges are read at most every 5 s, however often they are scraped.
        await wait_for(paused_gauge, 10, "the paused gauge", step=0.5)

        await row.locator("button.resume").click()
        assert "receiving" in await row.locator("td.state").inner_text()
        await wait_for(lambda: answers(200), 10, "the resumed source to accept", step=0.2)
        await page.click("#run-reconcile")
        assert await page.locator("#reconciliation").count() == 1
        await shoot(page, shots, "03-resumed-and-reconciled")
        audit = [(a.command, a.actor) for a in await inbox.store.audit.list_operator_actions()]
        assert ("pause", "admin:ana") in audit and ("resume", "admin:ana") in audit
        await page.close()


async def test_a_wrong_token_is_refused_in_the_browser(
    sqlite_url: str, browser: Any, shots: Path
) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox:
        page = await browser.new_page()
        await page.goto(f"{inbox.base_url}/admin/dead-letters")
        assert "/admin/login" in page.url
        await page.fill("input[name=token]", "not-the-token")
        await page.click("button[type=submit]")
        assert "not valid" in await page.inner_text("#login-error")
        await shoot(page, shots, "01-refused")
        cookies = await page.context.cookies()
        assert not cookies
        await page.goto(f"{inbox.base_url}/admin/")
        assert "/admin/login" in page.url
        await page.close()
