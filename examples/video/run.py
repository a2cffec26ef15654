"""The second scenario, end to end: a video provider's task events (queued, processing,
ready, failed) move tenant-owned tasks only forward, and each owner is told once.

    python examples/video/run.py                       # on a temporary SQLite file
    python examples/video/run.py --database postgresql://127.0.0.1/test

What runs, in this process: the inbox (receiver, workers and outbox relay) and a fake
notification service (notifier.py), each on its own port. The provider is played by
signed requests. Shown: the happy path, a repeated delivery, a late ``processing`` after
``ready``, an event naming another tenant's task, and an event that comes before its
task is known.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import uvicorn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from notifier import Notifier  # noqa: E402

from hookinbox import Inbox, load_config  # noqa: E402
from hookinbox.logs import configure_logging  # noqa: E402
from hookinbox.store import Store  # noqa: E402
from hookinbox.testing import signed_request  # noqa: E402

#: A demo secret for this example only; a real deployment sets its own.
DEMO_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """``app`` under uvicorn on a free local port, in this event loop (with its lifespan)."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(15):
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        async with asyncio.timeout(20):
            await task


async def wait_for(check: Callable[[], Any], what: str, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = await check()
        if result:
            return result
        await asyncio.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


async def outcome_of(store: Store, event_id: str) -> str | None:
    """What the worker made of the event: ``applied``, a rejection code, or ``parked``."""
    found = await store.journal.get_delivery(event_id)
    if found is None or not found.jobs:
        return None
    job = found.jobs[0]
    if job.state == "accepted" and job.last_error == "parked":
        return "parked"
    if job.state in ("completed", "failed"):
        return job.last_error or "applied"
    return None


def callback(event_id: str, status: str, task_id: str, tenant: str, owner: str) -> dict[str, Any]:
    """The provider's callback about its task ``task_id``."""
    return {
        "id": event_id,
        "type": f"video.{status}",
        "data": {
            "task_id": task_id,
            "tenant_id": tenant,
            "owner_id": owner,
            "created_at": "2025-01-01T12:00:00Z",
        },
    }


async def main(database: str | None = None, say: Callable[[str], None] = print) -> dict[str, Any]:
    os.environ.setdefault("VIDEOAPI_WEBHOOK_SECRET", DEMO_SECRET)
    notifier = Notifier()
    with tempfile.TemporaryDirectory(prefix="video-example-") as tmp:
        database = database or f"sqlite:///{Path(tmp) / 'hookinbox.db'}"
        async with serving(notifier.app) as notifier_url:
            text = (HERE / "hookinbox.toml").read_text()
            text = text.replace('"sqlite:///var/video-example.db"', json.dumps(database))
            text = text.replace(
                '"http://127.0.0.1:9000/notify"', json.dumps(notifier_url + "/notify")
            )
            config_path = Path(tmp) / "hookinbox.toml"
            config_path.write_text(text)
            inbox = Inbox(load_config(config_path))
            async with serving(inbox.app) as inbox_url:
                say(f"store: {database.split('?')[0]}")
                return await scenario(inbox, inbox_url, notifier, say)


async def scenario(
    inbox: Inbox, inbox_url: str, notifier: Notifier, say: Callable[[str], None]
) -> dict[str, Any]:
    store, tasks = inbox.store, inbox.resources
    source = inbox.config.sources["videoapi"]
    # The application starts three renders and attaches the provider's task ids as the
    # provider answers; the third answer has not come back yet.
    mine = await tasks.create("video", tenant="acme", owner="user-7", provider_ref="vid_A")
    theirs = await tasks.create("video", tenant="globex", owner="user-9", provider_ref="vid_B")
    early = await tasks.create("video", tenant="acme", owner="user-7")
    say(f"tasks: {mine.id} (acme/user-7, vid_A), {theirs.id} (globex/user-9, vid_B),")
    say(f"       {early.id} (acme/user-7, provider id not attached yet)")
    outcomes: dict[str, Any] = {}

    async with httpx.AsyncClient(timeout=30) as client:

        async def deliver(step: str, event: dict[str, Any], *, settle: bool = True) -> str:
            request = signed_request(source, event)
            url = f"{inbox_url}/webhooks/videoapi"
            answer = (await client.post(url, content=request.body, headers=request.headers)).json()
            status = answer.get("status", answer.get("error"))
            line = f"{step} {event['type']} {event['data']['task_id']} ({event['id']}): {status}"
            if status == "accepted" and settle:
                done = await wait_for(lambda: outcome_of(store, event["id"]), event["id"])
                outcomes[event["id"]] = done
                line += f", {done}"
            say(line)
            return str(status)

        for n, status in enumerate(["queued", "processing", "ready"], start=1):
            await deliver(f"{n}.", callback(f"evt_A{n}", status, "vid_A", "acme", "user-7"))
        repeat = await deliver(
            "4. the provider repeats", callback("evt_A3", "ready", "vid_A", "acme", "user-7")
        )
        await deliver("5. late", callback("evt_A4", "processing", "vid_A", "acme", "user-7"))
        await deliver(
            "6. another tenant's task", callback("evt_B1", "ready", "vid_B", "acme", "user-7")
        )
        await deliver("7. early", callback("evt_C1", "ready", "vid_C", "acme", "user-7"))
        await tasks.attach_ref(early.id, "vid_C")
        applied = await wait_for(
            lambda: _applied(store, "evt_C1", outcomes), "the parked event to be applied"
        )
        say(f"   the provider id vid_C is attached to {early.id}: the parked event is {applied}")

        keys = {f"video-ready:{mine.id}", f"video-ready:{early.id}"}
        await wait_for(lambda: _notified(notifier, keys), "the two notifications")
        await asyncio.sleep(0.5)  # nothing more comes

    final = {
        view.id: view.state
        for view in [await store.resources.get_resource(t.id) for t in (mine, theirs, early)]
        if view
    }
    log = await tasks.transitions(mine.id)
    say("states: " + ", ".join(f"{rid} {state}" for rid, state in final.items()))
    steps = [f"{t.from_state or '-'} -> {t.to_state} {t.outcome}" for t in log]
    steps = [
        f"{step} ({t.reason})" if t.reason else step for step, t in zip(steps, log, strict=True)
    ]
    say(f"{mine.id} transitions: " + "; ".join(steps))
    for message in notifier.delivered:
        say(f"notified {message.get('owner')}: {message['key']} (state {message.get('state')})")
    say(
        f"notifications: {len(notifier.delivered)} for 2 ready tasks, each key delivered once; "
        f"{theirs.id} of globex untouched."
    )
    return {
        "outcomes": outcomes,
        "repeat": repeat,
        "states": {"mine": final[mine.id], "theirs": final[theirs.id], "early": final[early.id]},
        "transitions": [[t.from_state, t.to_state, t.outcome, t.reason] for t in log],
        "notified": sorted(m["key"] for m in notifier.delivered),
        "notify_requests": dict(notifier.requests),
        "ids": {"mine": mine.id, "theirs": theirs.id, "early": early.id},
    }


async def _applied(store: Store, event_id: str, outcomes: dict[str, Any]) -> str | None:
    done = await outcome_of(store, event_id)
    if done in (None, "parked"):
        return None
    outcomes[event_id + ":after_attach"] = done
    return done


async def _notified(notifier: Notifier, keys: set[str]) -> bool:
    return {m["key"] for m in notifier.delivered} >= keys


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", help="store URL (default: a temporary SQLite file)")
    parser.add_argument("--summary", help="also write what happened as JSON to this file")
    parser.add_argument("--verbose", action="store_true", help="show hookinbox's own log lines")
    args = parser.parse_args()
    configure_logging("console", "info" if args.verbose else "error")
    summary = asyncio.run(main(args.database))
    if args.summary:
        Path(args.summary).write_text(json.dumps(summary, indent=2))
