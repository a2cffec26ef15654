"""A resource route marked ``inline = true`` applies the transition in the receiver's own
commit: with the store down the provider gets 503 and nothing is half-applied; once the
store is back, the 2xx means the transition and its outbox row are already durable."""

from __future__ import annotations

import httpx

from tests.pipeline.test_store_down import cuttable_store  # noqa: F401  (the fixture)
from tests.resources.support import NotifyService, outbox_settings, video_event, video_route
from tests.support.inbox import make_config, running_inbox
from tests.support.waiting import wait_for


async def test_store_down_answers_503_and_applies_nothing_then_applies_once(
    cuttable_store: tuple[str, object],  # noqa: F811
    client: httpx.AsyncClient,
) -> None:
    url, switch = cuttable_store
    with NotifyService() as notify:
        config = make_config(
            url, routes=[video_route(inline=True)], outbox=outbox_settings(notify.url)
        )
        async with running_inbox(config) as inbox:
            task = await inbox.inbox.resources.create(
                "video", tenant="acme", owner="user-1", provider_ref="prov-1"
            )
            body, headers = video_event("evt_ready", "ready", "prov-1")
            switch.cut()  # type: ignore[attr-defined]
            try:
                for _ in range(2):
                    answer = await client.post(inbox.url(), content=body, headers=headers)
                    assert answer.status_code == 503
                    assert answer.headers["retry-after"].isdigit()
            finally:
                switch.restore()  # type: ignore[attr-defined]
            untouched = await inbox.store.resources.get_resource(task.id)
            assert untouched is not None and untouched.state == "submitted"
            assert await inbox.store.outbox.list_outbox() == []
            assert (await inbox.store.count_rows())["deliveries"] == 0

            answer = await client.post(inbox.url(), content=body, headers=headers)
            assert answer.json()["status"] == "accepted"
            # Durable at the 2xx: no worker had to run for this.
            applied = await inbox.store.resources.get_resource(task.id)
            rows = await inbox.store.outbox.list_outbox()
            found = await inbox.store.journal.get_delivery("evt_ready")
            again = await client.post(inbox.url(), content=body, headers=headers)
            assert again.json()["status"] == "duplicate"

            async def notified() -> bool:
                return len(notify.handled) == 1

            await wait_for(notified, 10, "the notification")
            log = await inbox.inbox.resources.transitions(task.id)
    assert applied is not None and (applied.state, applied.version) == ("ready", 2)
    assert [r.key for r in rows] == [f"video-ready:{task.id}"]
    assert found is not None and [j.state for j in found.jobs] == ["completed"]
    assert [t.outcome for t in log] == ["created", "applied"]
    assert notify.keys() == {f"video-ready:{task.id}": 1}
