"""A dead letter that holds its key (an ordered route with ``on_dead_letter = "hold"``) is
marked on the admin's dead-letter page; one of a released key is not. Store-agnostic:
SQLite."""

from __future__ import annotations

import hashlib

import httpx

from hookinbox.ids import job_id, new_delivery_id
from hookinbox.store import NewDelivery, NewJob, Store
from tests.admin.support import admin_config, login
from tests.support.inbox import running_inbox
from tests.support.journal import settle_all


async def _ordered_delivery(store: Store, event_id: str, *, hold: bool) -> str:
    delivery_id = new_delivery_id()
    body = b'{"id": "%s"}' % event_id.encode()
    key = hashlib.sha256(f"test\x1fcrm\x1f{event_id}".encode()).hexdigest()
    job = NewJob(job_id(delivery_id, "crm"), "crm", 1, key, hold)
    await store.journal.reserve_deliveries(
        [
            NewDelivery(
                id=delivery_id,
                source="test",
                event_id=event_id,
                event_type="crm.lead.created",
                body_sha256=hashlib.sha256(body).hexdigest(),
                body=body,
                headers={},
                jobs=(job,),
                max_attempts=1,
            )
        ]
    )
    return job.id


async def test_the_dead_letter_page_marks_a_dead_letter_that_holds_its_key(
    sqlite_url: str,
) -> None:
    config = admin_config(sqlite_url)
    async with (
        running_inbox(config, run_workers=False) as inbox,
        httpx.AsyncClient() as client,
    ):
        held = await _ordered_delivery(inbox.store, "evt_held", hold=True)
        released = await _ordered_delivery(inbox.store, "evt_released", hold=False)
        await settle_all(inbox.store, "failed")
        await login(client, inbox.base_url)
        page = await client.get(f"{inbox.base_url}/admin/dead-letters")
    assert page.status_code == 200
    rows = {job: page.text.split(job, 1)[1].split("</tr>", 1)[0] for job in (held, released)}
    assert "holds its key" in rows[held]
    assert "holds its key" not in rows[released]
