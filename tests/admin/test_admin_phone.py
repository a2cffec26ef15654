"""The admin on a 390 px phone and a 1366 px laptop, in Chromium: on every page the key
cell of each table row, its state or status and every button are inside the viewport
and inside any scrolling box around them (nothing to scroll sideways to reach), the
chart's labels are drawn at 10 px or more; the Rejected page has headings and a Retry
that comes back with its outcome; dead letters are filtered by a select of the
configured sources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.admin.support import TOKEN
from tests.admin.test_admin_browser import shoot
from tests.admin.test_admin_browser_layout import (
    PAGES,
    layout_config,
    logged_in_page,
    populated,
)
from tests.support.inbox import running_inbox

pytestmark = pytest.mark.slow

#: What must be reachable without a sideways scroll: buttons, key cells, states.
MUST_SEE = "main button, main td.key, main td.state, main td.status, main select"

#: Each element of MUST_SEE outside the viewport or clipped by a scrolling ancestor.
OFF_SCREEN = """(selector) => {
  const width = window.innerWidth;
  const found = [];
  let checked = 0;
  for (const el of document.querySelectorAll(selector)) {
    if (el.closest("[hidden]")) continue;
    checked += 1;
    const r = el.getBoundingClientRect();
    let left = 0, right = width;
    for (let p = el.parentElement; p; p = p.parentElement) {
      if (getComputedStyle(p).overflowX !== "visible") {
        const box = p.getBoundingClientRect();
        left = Math.max(left, box.left); right = Math.min(right, box.right);
      }
    }
    if (r.width === 0 || r.left < left - 0.5 || r.right > right + 0.5) {
      const what = el.outerHTML.slice(0, 90);
      found.push({ what, left: r.left, right: r.right, box: [left, right] });
    }
  }
  return { checked, found, scrollWidth: document.documentElement.scrollWidth };
}"""

#: The chart's labels in CSS pixels as drawn (font size in viewBox units times the scale).
LABEL_PX = """() => {
  const svg = document.querySelector("#chart");
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  return [...svg.querySelectorAll("text")]
    .map((t) => parseFloat(getComputedStyle(t).fontSize) * scale);
}"""


@pytest.mark.parametrize("width", [390, 1366])
async def test_every_table_key_state_and_button_is_on_screen(
    sqlite_url: str, browser: Any, shots: Path, monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    monkeypatch.setenv("HOOKINBOX_ADMIN_TOKEN", TOKEN)
    async with running_inbox(layout_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        ids = await populated(inbox, client)
        page = await logged_in_page(browser, inbox.base_url, width, 844)
        for name, (path, _) in PAGES.items():
            await page.goto(inbox.base_url + path.format(**ids))
            await shoot(page, shots, f"{width}-{name}")
            seen = await page.evaluate(OFF_SCREEN, MUST_SEE)
            assert seen["scrollWidth"] <= width, (name, seen["scrollWidth"])
            assert seen["checked"] > 0 and seen["found"] == [], (name, seen["found"])
        # The columns an on-call engineer looks for first, each checked above.
        for path, cells in (
            ("/admin/", "#sources td.state"),
            ("/admin/deliveries", "#deliveries td.status"),
            ("/admin/dead-letters", "#dead button.retry-one"),
            ("/admin/rejected", "#rejected button.retry-rejected"),
        ):
            await page.goto(inbox.base_url + path)
            assert await page.locator(cells).count() >= 1, cells
        await page.goto(inbox.base_url + "/admin/")
        labels = await page.evaluate(LABEL_PX)
        assert len(labels) >= 6 and min(labels) >= 10, labels
        await page.close()


async def test_rejected_page_has_headings_and_a_retry_that_returns_with_the_outcome(
    sqlite_url: str, browser: Any, shots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKINBOX_ADMIN_TOKEN", TOKEN)
    async with running_inbox(layout_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        await populated(inbox, client)
        (kept,) = await inbox.store.rejected.list_rejected()
        page = await logged_in_page(browser, inbox.base_url, 390, 844)
        await page.goto(f"{inbox.base_url}/admin/rejected")
        main = await page.inner_text("main")
        assert "([rejected])" not in main and "[rejected]" not in main
        headings = await page.locator("main h2").all_inner_texts()
        assert headings == ["Kept deliveries", "Totals per source and reason"]
        await page.get_by_role("button", name=f"Retry rejected delivery {kept.id}").click()
        await page.wait_for_url(f"{inbox.base_url}/admin/rejected?**")
        flash = await page.inner_text("#flash")
        # Signed with another secret: still refused, and said so.
        assert kept.id in flash and "invalid_signature" in flash and "still refused" in flash
        await shoot(page, shots, "rejected-retried")
        again = await inbox.store.rejected.get_rejected(kept.id)
        assert again is not None and again.retry_outcome == "invalid_signature"
        audit = await inbox.store.audit.list_operator_actions()
        assert [a.command for a in audit] == ["rejected-retry"]
        assert audit[0].actor == "admin:ana"
        # Dead letters: the source filter is a select of the configured sources.
        await page.goto(f"{inbox.base_url}/admin/dead-letters")
        options = await page.locator("#source-filter option").all_inner_texts()
        assert options == ["all sources", *sorted(inbox.inbox.config.sources)]
        await page.select_option("#source-filter", "test")
        await page.click("#apply-filter")
        await page.wait_for_url(f"{inbox.base_url}/admin/dead-letters?**source=test**")
        assert await page.locator("#dead tr[data-job-id]").count() >= 1
        await page.close()
