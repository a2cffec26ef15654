"""/admin/rejected: the kept rejected deliveries, read-only, never a body or header value."""

from __future__ import annotations

import httpx

from tests.admin.support import admin_config, login
from tests.support.inbox import running_inbox
from tests.support.signing import WRONG_SECRET, delivery


async def test_the_rejected_page_lists_refusals_without_their_content(sqlite_url: str) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        body, headers = delivery("evt_admin_rej", secret=WRONG_SECRET, secret_word="s3cr3t-body")
        refused = await client.post(inbox.url(), content=body, headers=headers)
        assert refused.status_code == 400
        await inbox.inbox.receiver.rejected.drain()
        (kept,) = await inbox.store.rejected.list_rejected()
        await login(client, inbox.base_url)
        page = await client.get(f"{inbox.base_url}/admin/rejected")
        assert page.status_code == 200
        assert kept.id in page.text and "invalid_signature" in page.text
        assert "s3cr3t-body" not in page.text
        assert headers["webhook-signature"] not in page.text
        bad = await client.get(f"{inbox.base_url}/admin/rejected?before=%00")
        assert bad.status_code == 400
