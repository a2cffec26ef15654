"""Helpers for the tracked-resource scenarios: a video route, signed video callbacks, and
a notification service that counts what it receives by Idempotency-Key."""

from __future__ import annotations

import asyncio
import collections
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.signing import delivery

RESOURCE = {
    "kind": "video",
    "ref": "/data/task_id",
    "tenant": "/data/tenant_id",
    "owner": "/data/owner_id",
    "event_time": "/data/at",
}


def video_route(**resource: Any) -> dict[str, Any]:
    return {"events": ["video.*"], "action": "video", "resource": {**RESOURCE, **resource}}


def outbox_settings(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "forward": url,
        "poll_interval_seconds": 0.05,
        "backoff_base_seconds": 0.1,
        "backoff_max_seconds": 0.5,
        "lease_seconds": 2,
        **extra,
    }


def video_event(
    event_id: str,
    status: str,
    task_id: str,
    *,
    tenant: str = "acme",
    owner: str = "user-1",
    **kw: Any,
) -> tuple[bytes, dict[str, str]]:
    """A signed provider callback ``video.{status}`` about the provider's ``task_id``."""
    return delivery(
        event_id,
        f"video.{status}",
        task_id=task_id,
        tenant_id=tenant,
        owner_id=owner,
        at="2024-01-01T00:00:00Z",
        **kw,
    )


class NotifyService:
    """The owner-notification service the outbox forwards to, as its own HTTP server.

    It records every request (``requests``) and handles each Idempotency-Key once
    (``handled``), the way an idempotent receiver does. ``hang_first`` makes it take the
    first request and never answer, so a relay can be killed mid-send.
    """

    def __init__(self, *, hang_first: bool = False) -> None:
        self.requests: list[dict[str, Any]] = []
        self.handled: collections.Counter[str] = collections.Counter()
        self.status = 200
        self._hang = threading.Event() if hang_first else None
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length))
                key = self.headers.get("idempotency-key") or ""
                with owner._lock:
                    owner.requests.append({"key": key, "body": body})
                    first = len(owner.requests) == 1
                    if owner.status == 200 and key not in owner.handled:
                        owner.handled[key] += 1
                if first and owner._hang is not None:
                    owner._hang.wait(30)  # the relay dies while waiting for this answer
                    return
                data = b'{"ok": true}'
                self.send_response(owner.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/notify"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> NotifyService:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._hang is not None:
            self._hang.set()
        self._server.shutdown()
        self._server.server_close()

    def keys(self) -> collections.Counter[str]:
        """Requests per key (a repeat after a crash shows as 2 here, once in handled)."""
        return collections.Counter(r["key"] for r in self.requests)


async def video_event_applied(store: Any, ref: str, status: str, *, event_id: str) -> Any:
    """A ``video.{status}`` delivery about ``ref`` applied through the store's own methods
    (reserve, claim, apply in one transaction); the store's outcome."""
    from hookinbox.resources.machine import VIDEO
    from hookinbox.store import ParkPolicy, ResourceEvent
    from tests.support.journal import add_delivery

    delivery_id = await add_delivery(
        store, event_id, actions=("video",), event_type=f"video.{status}"
    )
    (job,) = [j for j in await store.queue.claim_due_jobs("test-worker", 100, 30)]
    assert job.delivery_id == delivery_id
    event = ResourceEvent(
        kind="video",
        provider_ref=ref,
        target=status,
        tenant=None,
        owner=None,
        event_type=f"video.{status}",
        event_time=None,
        delivery_id=delivery_id,
        job_id=job.id,
    )
    return await store.resources.apply_resource_event(
        job.id, job.lease_token, "test", event, VIDEO, ParkPolicy()
    )


async def ready_outbox_row(store: Any, ref: str, *, event_id: str | None = None) -> str:
    """A video resource moved to ``ready`` by a delivery through the store's own methods:
    its ``video-ready`` outbox row is pending. Returns the row's key."""
    from hookinbox.resources.service import new_resource_id

    resource = await store.resources.create_resource(
        new_resource_id(), "video", tenant="acme", owner="u", state="submitted", provider_ref=ref
    )
    outcome = await video_event_applied(store, ref, "ready", event_id=event_id or f"evt_{ref}")
    assert outcome.outbox_keys == (f"video-ready:{resource.id}",)
    return str(outcome.outbox_keys[0])


# Python-callable outbox senders (``outbox.handler = "tests.resources.support:..."``).
RECEIVED: list[Any] = []


async def record_message(message: Any) -> None:
    RECEIVED.append(message)


def refuse_message(message: Any) -> None:
    """A sync sender (run in a thread) whose service is down."""
    raise ConnectionRefusedError("notifier down")


async def hang_on_message(message: Any) -> None:
    await asyncio.sleep(3600)


async def slow_message(message: Any) -> None:
    """Longer than a 1 s lease: the relay must renew it meanwhile."""
    await asyncio.sleep(1.8)
    RECEIVED.append(message)
