"""Issue 12, items 5 and 7, in Chromium: at 390 px no admin page is wider than the
viewport, the header's links stay on the header at >= 4.5:1 contrast; at 1366 px tables
scroll inside their container and times stay on one line; every page marks itself in the
navigation, labels its inputs and names its buttons; times are relative with the
absolute time to the millisecond on hover; the overview says as of when, reloads itself,
shows a pause at once and draws failures on a chart with axes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.admin.support import FLAKY_ROUTE, TOKEN
from tests.admin.test_admin_browser import shoot
from tests.resources.support import video_event, video_route
from tests.support.inbox import RunningInbox, make_config, running_inbox
from tests.support.signing import WRONG_SECRET, delivery
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

#: The page's own measurements: widths, the header's links against the header.
MEASURE = """() => {
  const lum = (rgb) => {
    const [r, g, b] = rgb.match(/[0-9.]+/g).slice(0, 3).map(Number).map((v) => {
      v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const contrast = (a, b) => {
    const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05);
  };
  const header = document.querySelector("header");
  const box = header ? header.getBoundingClientRect() : null;
  const links = header ? [...header.querySelectorAll("a, .who, button")].map((el) => {
    const r = el.getBoundingClientRect();
    return {
      text: el.textContent.trim(),
      inside: r.left >= box.left - 0.5 && r.right <= box.right + 0.5
        && r.top >= box.top - 0.5 && r.bottom <= box.bottom + 0.5,
      contrast: contrast(getComputedStyle(el).color, getComputedStyle(header).backgroundColor),
    };
  }) : [];
  const times = [...document.querySelectorAll("td time")].map((t) => {
    const lines = t.getClientRects().length;
    const height = t.getBoundingClientRect().height;
    const line = parseFloat(getComputedStyle(t).lineHeight) || 20;
    return { lines, oneLine: lines === 1 && height < line * 1.5, title: t.title };
  });
  const unlabelled = [...document.querySelectorAll("input, select, textarea")]
    .filter((el) => el.type !== "hidden" && el.labels.length === 0)
    .map((el) => el.outerHTML.slice(0, 80));
  const unnamed = [...document.querySelectorAll("button")]
    .filter((b) => !(b.getAttribute("aria-label") || b.textContent).trim())
    .map((b) => b.outerHTML.slice(0, 80));
  const current = [...document.querySelectorAll("nav a[aria-current=page]")]
    .map((a) => a.textContent.trim());
  return {
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    links, times, unlabelled, unnamed, current,
  };
}"""

PAGES = {
    "overview": ("/admin/", "Overview"),
    "deliveries": ("/admin/deliveries", "Deliveries"),
    "delivery": ("/admin/deliveries/{delivery}", "Deliveries"),
    "dead-letters": ("/admin/dead-letters", "Dead letters"),
    "confirm": ("/admin/dead-letters/confirm?job_id={job}", "Dead letters"),
    "sources": ("/admin/sources?reconcile=1", "Sources"),
    "rejected": ("/admin/rejected", "Rejected"),
    "reviews": ("/admin/reviews", "Reviews"),
    "reviews-all": ("/admin/reviews?all=1", "Reviews"),
    "destinations": ("/admin/destinations", "Destinations"),
}


async def populated(inbox: RunningInbox, client: httpx.AsyncClient) -> dict[str, str]:
    """Deliveries with long ids, dead letters, a kept rejection, a rejected transition."""
    await inbox.inbox.resources.create("video", tenant="acme", owner="user-1", provider_ref="p-1")
    for n in range(3):
        body, headers = delivery(f"evt_{'long' * 12}_{n}", "crm.deal.won", amount=n)
        await client.post(inbox.url(), content=body, headers=headers)
    body, headers = delivery("evt_refused", secret=WRONG_SECRET)
    await client.post(inbox.url(), content=body, headers=headers)
    for event_id, status in (("evt_ready", "ready"), ("evt_late", "processing")):
        body, headers = video_event(event_id, status, "p-1")
        await client.post(inbox.url(), content=body, headers=headers)

        async def settled(event_id: str = event_id) -> bool:
            found = await inbox.store.journal.get_delivery(event_id)
            return found is not None and found.status in ("completed", "failed")

        await wait_for(settled, 15, f"{event_id} to settle")

    async def dead() -> bool:
        return len(await inbox.store.queue.list_dead_letters()) >= 3

    await wait_for(dead, 15, "the dead letters")
    await inbox.inbox.receiver.rejected.drain()
    assert await inbox.store.reviews.list_reviews()
    (job, *_) = await inbox.store.queue.list_dead_letters()
    return {"delivery": job.delivery_id, "job": job.id}


async def logged_in_page(browser: Any, base: str, width: int, height: int) -> Any:
    page = await browser.new_page(viewport={"width": width, "height": height})
    await page.goto(f"{base}/admin/login")
    await page.fill("input[name=name]", "ana")
    await page.fill("input[name=token]", TOKEN)
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{base}/admin/")
    return page


def layout_config(sqlite_url: str) -> Any:
    routes = [{**FLAKY_ROUTE, "events": ["crm.*"]}, video_route()]
    destination = {"url": "http://127.0.0.1:9/internal/crm-hooks", "max_in_flight": 2}
    destination.update({"rate_per_second": 5, "circuit_failures": 3})
    return make_config(
        sqlite_url,
        routes=routes,
        worker={"max_attempts": 1},
        destinations={"crm-with-a-long-destination-name": destination},
    )


async def test_no_page_is_wider_than_a_390_px_phone_and_the_header_stays_readable(
    sqlite_url: str, browser: Any, shots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKINBOX_ADMIN_TOKEN", TOKEN)
    async with running_inbox(layout_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        ids = await populated(inbox, client)
        page = await logged_in_page(browser, inbox.base_url, 390, 844)
        for name, (path, nav) in PAGES.items():
            await page.goto(inbox.base_url + path.format(**ids))
            await shoot(page, shots, f"390-{name}")
            seen = await page.evaluate(MEASURE)
            assert seen["scrollWidth"] <= seen["innerWidth"] == 390, (name, seen["scrollWidth"])
            for link in seen["links"]:
                assert link["inside"], (name, link)
                assert link["contrast"] >= 4.5, (name, link)
            assert seen["current"] == [nav], (name, seen["current"])
            assert seen["unlabelled"] == [], (name, seen["unlabelled"])
            assert seen["unnamed"] == [], (name, seen["unnamed"])
        await page.close()
        login = await browser.new_page(viewport={"width": 390, "height": 844})
        await login.goto(f"{inbox.base_url}/admin/login")
        seen = await login.evaluate(MEASURE)
        assert seen["scrollWidth"] <= 390 and seen["unlabelled"] == []
        await login.close()


async def test_at_1366_px_tables_scroll_in_their_container_and_times_stay_on_one_line(
    sqlite_url: str, browser: Any, shots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKINBOX_ADMIN_TOKEN", TOKEN)
    async with running_inbox(layout_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        ids = await populated(inbox, client)
        page = await logged_in_page(browser, inbox.base_url, 1366, 900)
        for name, (path, _) in PAGES.items():
            await page.goto(inbox.base_url + path.format(**ids))
            await shoot(page, shots, f"1366-{name}")
            seen = await page.evaluate(MEASURE)
            assert seen["scrollWidth"] <= seen["innerWidth"] == 1366, name
            for shown in seen["times"]:
                assert shown["oneLine"], (name, shown)
                # The absolute time, to the millisecond, on hover.
                assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC", shown["title"])
        await page.goto(f"{inbox.base_url}/admin/deliveries")
        assert await page.locator("#deliveries td time").count() >= 3
        text = await page.locator("#deliveries td time").first.inner_text()
        assert re.fullmatch(r"(now|\d+ (s|min|h|d) ago)", text), text
        await page.close()


async def test_the_overview_is_current_refreshes_itself_and_charts_failures_on_axes(
    sqlite_url: str, browser: Any, shots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKINBOX_ADMIN_TOKEN", TOKEN)
    async with running_inbox(layout_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        await populated(inbox, client)
        page = await logged_in_page(browser, inbox.base_url, 1366, 900)
        assert "As of" in await page.inner_text("#as-of")
        refresh = await page.locator("meta[http-equiv=refresh]").get_attribute("content")
        assert refresh is not None and int(refresh) <= 30
        assert await page.locator("#chart #x-axis").count() == 1
        assert await page.locator("#chart #y-axis").count() == 1
        assert await page.locator("#chart text.x-label").count() >= 4
        assert await page.locator("#chart text.y-label").count() >= 2
        assert await page.locator("#chart rect.failed").count() >= 1
        assert await page.locator("#chart rect.accepted").count() >= 1
        await shoot(page, shots, "01-overview")
        # A pause shows on the overview at once: no cache between the store and the page.
        await page.goto(f"{inbox.base_url}/admin/sources")
        row = page.locator("#sources tr[data-source=test]")
        await row.get_by_label("Reason").fill("contract change")
        await row.get_by_role("button", name="Pause source test").click()
        await page.goto(f"{inbox.base_url}/admin/")
        state = page.locator("#sources tr[data-source=test] td.state")
        assert await state.inner_text() == "paused"
        await shoot(page, shots, "02-paused")
        # The rejected deliveries are one click from the navigation.
        await page.get_by_role("navigation").get_by_role("link", name="Rejected").click()
        assert "evt_refused" not in await page.inner_text("main")  # ids, never bodies
        assert await page.locator("#rejected tr[data-id]").count() == 1
        await page.close()
