"""Searching deliveries on the admin page reads as the CLI and the API do (one ops
function): relative times, type globs, pasted ids, a count, a first-page link, and an
event id two sources share listed rather than one picked. Store-agnostic: SQLite."""

from __future__ import annotations

from urllib.parse import quote

import httpx

from tests.admin.support import admin_config, login
from tests.support.inbox import running_inbox
from tests.support.journal import add_delivery


async def test_since_24h_a_type_glob_and_a_pasted_job_id_find_deliveries(sqlite_url: str) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        store = inbox.store
        ids = [await add_delivery(store, f"evt_{n}", event_type="Order.Paid") for n in range(3)]
        await add_delivery(store, "evt_other", event_type="invoice.paid")
        await login(client, inbox.base_url)
        page = await client.get(f"{inbox.base_url}/admin/deliveries?since=24h&type=order.*")
        assert page.status_code == 200
        assert "3 matching deliveries" in page.text and ids[0] in page.text
        assert "evt_other" not in page.text and 'id="first"' not in page.text
        pasted = quote(f"  {ids[1]}:crm ")
        page = await client.get(f"{inbox.base_url}/admin/deliveries?ref={pasted}")
        assert "1 matching delivery" in page.text and ids[1] in page.text
        # A later page links back to the first, keeping the filters.
        later = await client.get(
            f"{inbox.base_url}/admin/deliveries?since=24h&type=order.*&before={ids[2]}"
        )
        assert "2 matching" not in later.text and "3 matching deliveries" in later.text
        assert 'id="first" href="/admin/deliveries?type=order.%2A&amp;since=24h"' in later.text


async def test_an_event_id_two_sources_share_lists_both_instead_of_picking_one(
    sqlite_url: str,
) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        first = await add_delivery(inbox.store, "evt_twice", source="test")
        second = await add_delivery(inbox.store, "evt_twice", source="other")
        await login(client, inbox.base_url)
        both = await client.get(f"{inbox.base_url}/admin/deliveries/evt_twice")
        assert both.status_code == 200
        assert first in both.text and second in both.text and "2 matching deliveries" in both.text
        one = await client.get(f"{inbox.base_url}/admin/deliveries/evt_twice?source=other")
        assert one.status_code == 200 and second in one.text and first not in one.text


async def test_a_payload_field_filter_on_the_page(sqlite_url: str) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        wanted = await add_delivery(inbox.store, "evt_c", data={"customer": "cus_42"})
        await add_delivery(inbox.store, "evt_d", data={"customer": "cus_43"})
        await login(client, inbox.base_url)
        where = quote("data.customer = cus_42")
        page = await client.get(f"{inbox.base_url}/admin/deliveries?where={where}")
        assert page.status_code == 200 and wanted in page.text and "evt_d" not in page.text
        wide = await client.get(f"{inbox.base_url}/admin/deliveries?where={where}&since=30d")
        assert wide.status_code == 400 and "7 days" in wide.text
