"""Retry all matching dead letters from the admin: a GET preview (count and ids), a POST
confirmation that redirects (reloading the result retries nothing), a bound, and a
refusal when the selection changed. Store-agnostic: SQLite."""

from __future__ import annotations

from urllib.parse import quote

import httpx

from hookinbox.store import DeadLetterCriteria
from tests.admin.support import admin_config, login
from tests.admin.test_admin_inputs import csrf_of
from tests.support.inbox import running_inbox
from tests.support.journal import add_delivery, settle_all


async def test_preview_then_confirm_retries_exactly_the_previewed_and_redirects(
    sqlite_url: str,
) -> None:
    config = admin_config(sqlite_url)
    async with (
        running_inbox(config, run_workers=False) as inbox,
        httpx.AsyncClient() as client,
    ):
        store = inbox.store
        for n in range(4):
            await add_delivery(store, f"evt_{n}", source="other", actions=("crm",))
        await add_delivery(store, "evt_keep", source="test", actions=("crm",))
        await settle_all(store, "failed", error="connect_error")
        await login(client, inbox.base_url)
        dead = await store.queue.list_dead_letters(
            DeadLetterCriteria(source="other"), order="oldest_failure"
        )
        assert len(dead) == 4
        base = f"{inbox.base_url}/admin/dead-letters/retry-matching"
        preview = await client.get(f"{base}?source=OTHER&reason=connect_error&since=1h&limit=3")
        assert preview.status_code == 200, preview.text[:300]
        assert "4 dead letters match" in preview.text and "Yes, retry 3" in preview.text
        for job in dead[:3]:
            assert job.id in preview.text
        assert dead[3].id not in preview.text
        assert await store.audit.list_operator_actions() == []

        form = {
            "csrf": csrf_of(preview.text),
            "confirm": "yes",
            "expect": "3",
            "limit": "3",
            "source": "other",
            "reason": "connect_error",
            "since": preview.text.split('name="since" value="', 1)[1].split('"', 1)[0],
            "until": "",
            "action": "",
        }
        done = await client.post(base, data=form, follow_redirects=False)
        assert done.status_code == 303
        assert done.headers["location"].startswith("/admin/dead-letters?")
        again = await client.get(inbox.base_url + done.headers["location"])
        assert again.status_code == 200 and "retried all matching: 3 requeued" in again.text
        actions = await store.audit.list_operator_actions()
        assert sorted(a.job_id or "" for a in actions) == sorted(j.id for j in dead[:3])
        assert {a.actor for a in actions} == {"admin:tester"}

        # Confirming the same preview again finds 1 left, not 3: refused, nothing retried.
        stale = await client.post(base, data=form, follow_redirects=False)
        assert stale.status_code == 303
        refused = await client.get(inbox.base_url + stale.headers["location"])
        assert "preview again" in refused.text
        assert len(await store.audit.list_operator_actions()) == 3


async def test_the_bound_and_a_missing_confirmation(sqlite_url: str) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        await login(client, inbox.base_url)
        base = f"{inbox.base_url}/admin/dead-letters/retry-matching"
        assert (await client.get(f"{base}?limit=1001")).status_code == 400
        assert (await client.get(f"{base}?since={quote('last tuesday')}")).status_code == 400
        empty = await client.get(base)
        assert empty.status_code == 200 and "Nothing to retry" in empty.text
        page = await client.get(f"{inbox.base_url}/admin/dead-letters")
        unconfirmed = await client.post(
            base, data={"csrf": csrf_of(page.text), "limit": "5"}, follow_redirects=False
        )
        assert unconfirmed.status_code == 400
