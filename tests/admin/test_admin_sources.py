"""/admin/sources over HTTP: each source's state in the CLI's and the API's one word,
``not_configured`` for a source only the store still knows."""

from __future__ import annotations

import re

import httpx

from tests.admin.support import admin_config, login
from tests.support.inbox import running_inbox


def _state(page: str, source: str) -> str:
    row = re.search(rf'<tr data-source="{source}">(.*?)</tr>', page, re.S)
    assert row, page[:2000]
    cell = re.search(r'<td class="state"[^>]*>(.*?)</td>', row.group(1), re.S)
    assert cell, row.group(1)
    return re.sub(r"<[^>]+>", "", cell.group(1)).strip()


async def test_a_source_gone_from_the_config_is_not_configured(sqlite_url: str) -> None:
    async with (
        running_inbox(admin_config(sqlite_url), run_workers=False) as inbox,
        httpx.AsyncClient() as client,
    ):
        await inbox.store.sources.set_source_paused("gone", paused=True, reason="v2", actor="t")
        await inbox.store.sources.set_source_paused("gone", paused=False, reason=None, actor="t")
        await login(client, inbox.base_url)
        page = await client.get(f"{inbox.base_url}/admin/sources")
        assert page.status_code == 200
        assert _state(page.text, "gone") == "not_configured"
        assert _state(page.text, "test") == "receiving"
        await inbox.store.sources.set_source_paused("test", paused=True, reason="v2", actor="t")
        page = await client.get(f"{inbox.base_url}/admin/sources")
        assert _state(page.text, "test") == "paused: v2"
