"""200 concurrent callbacks for 20 video tasks, in random order, on both stores: every
task ends in a state the machine allows, and each terminal task is notified once."""

from __future__ import annotations

import asyncio
import random

import httpx

from hookinbox.resources.machine import VIDEO
from tests.resources.support import NotifyService, outbox_settings, video_event, video_route
from tests.support.inbox import make_config, running_inbox
from tests.support.waiting import wait_for


async def test_200_events_for_20_resources_in_random_order(
    db_url: str, client: httpx.AsyncClient
) -> None:
    rng = random.Random(4)
    with NotifyService() as notify:
        config = make_config(
            db_url,
            routes=[video_route()],
            outbox=outbox_settings(notify.url, concurrency=8),
            worker={"concurrency": 16},
        )
        async with running_inbox(config) as inbox:
            tasks = [
                await inbox.inbox.resources.create(
                    "video", tenant="acme", owner=f"user-{n}", provider_ref=f"prov-{n}"
                )
                for n in range(20)
            ]
            events = []
            for n in range(20):
                for k in range(10):
                    status = rng.choice(["processing", "processing", "ready", "failed"])
                    events.append((f"evt_{n}_{k}", status, n))
            rng.shuffle(events)
            gate = asyncio.Semaphore(50)

            async def post(event_id: str, status: str, n: int) -> httpx.Response:
                body, headers = video_event(event_id, status, f"prov-{n}", owner=f"user-{n}")
                async with gate:
                    for attempt in range(3):
                        try:
                            return await client.post(inbox.url(), content=body, headers=headers)
                        except httpx.TransportError:  # a provider retries; dedup makes it safe
                            if attempt == 2:
                                raise
                    raise AssertionError("unreachable")

            answers = await asyncio.gather(*(post(*event) for event in events))
            assert {a.status_code for a in answers} == {200}

            async def all_done() -> bool:
                rows = await inbox.store.journal.list_deliveries(limit=1000)
                return len(rows) == 200 and all(r.status == "completed" for r in rows)

            await wait_for(all_done, 60, "every job")
            views = {t.id: await inbox.store.resources.get_resource(t.id) for t in tasks}
            logs = {t.id: await inbox.inbox.resources.transitions(t.id) for t in tasks}
            terminal = {
                rid for rid, v in views.items() if v is not None and v.state in VIDEO.terminal
            }

            async def notified() -> bool:
                return len(notify.handled) >= len(terminal)

            await wait_for(notified, 30, "one notification per terminal task")
            await asyncio.sleep(0.3)
            counts = await inbox.store.resources.transition_counts()

    got_terminal_event = {tasks[n].id for _, status, n in events if status in ("ready", "failed")}
    assert terminal == got_terminal_event
    for rid, view in views.items():
        assert view is not None
        applied = [t for t in logs[rid] if t.outcome == "applied"]
        # The applied transitions form a path the machine allows, ending where the task is.
        state = VIDEO.initial
        for t in applied:
            assert t.from_state == state and VIDEO.judge(state, t.to_state or "") is None
            state = t.to_state or ""
        assert state == view.state and view.version == 1 + len(applied)
    expected = {f"video-{views[rid].state}:{rid}" for rid in terminal}  # type: ignore[union-attr]
    assert set(notify.keys()) == expected
    assert all(n == 1 for n in notify.keys().values())
    assert sum(counts.values()) == 200
