"""The real inbox under a real uvicorn socket server, inside the test's event loop, and the
config most tests start from."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import uvicorn

from hookinbox.app import Inbox
from hookinbox.config import Config, config_from_mapping
from hookinbox.server import ConnectionLimits, uvicorn_config
from tests.support.processes import free_port
from tests.support.signing import SECRET_ENV

_T = TypeVar("_T")


def make_config(
    db_url: str, *, routes: list[dict[str, Any]] | None = None, **sections: Any
) -> Config:
    """One source named ``test`` (Standard Webhooks) with the given routes."""
    source = {"scheme": "standard-webhooks", "secret_env": SECRET_ENV}
    source.update(sections.pop("source", {}))
    data: dict[str, Any] = {
        "database": db_url,
        "sources": {
            "test": {
                **source,
                "routes": routes
                if routes is not None
                else [
                    {"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}
                ],
            }
        },
        "worker": {
            "concurrency": 4,
            "max_attempts": 3,
            "backoff_base_seconds": 0.2,
            "backoff_max_seconds": 1,
            "lease_seconds": 5,
            "poll_interval_seconds": 0.2,
            **sections.pop("worker", {}),
        },
        **sections,
    }
    return config_from_mapping(data)


class RunningInbox:
    def __init__(self, inbox: Inbox, base_url: str) -> None:
        self.inbox = inbox
        self.base_url = base_url
        self.store = inbox.store

    def url(self, source: str = "test") -> str:
        return f"{self.base_url}/webhooks/{source}"


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """``app`` under a real uvicorn socket server set up as ``hookinbox serve`` sets it up
    (the bounded protocol, the default limits), inside the test's event loop; yields its
    base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn_config(app, ConnectionLimits(), host="127.0.0.1", port=port))
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(15):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        async with asyncio.timeout(20):
            await task


@contextlib.asynccontextmanager
async def running_inbox(config: Config, *, run_workers: bool = True) -> AsyncIterator[RunningInbox]:
    """The real app under a real uvicorn socket server, inside the test's event loop."""
    inbox = Inbox(config, run_workers=run_workers)
    async with serving(inbox.app) as base_url:
        yield RunningInbox(inbox, base_url)


class InboxInThread:
    """The real inbox under uvicorn on an event loop of its own thread, for a synchronous
    test (a hypothesis property) that drives it with a plain client and runs store calls
    on the inbox's loop with :meth:`call`. Started and stopped by the test, bounded."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.running: RunningInbox | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported by __enter__ or __exit__
            self._failure = exc
            self._ready.set()
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with running_inbox(self._config) as running:
            self.running = running
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> RunningInbox:
        self._thread.start()
        if not self._ready.wait(30) or self.running is None:
            raise AssertionError(f"the inbox did not start: {self._failure!r}")
        return self.running

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        assert not self._thread.is_alive(), "the inbox did not stop within 30 s"

    def call(self, coro: Coroutine[Any, Any, _T], timeout: float = 30) -> _T:
        """Run ``coro`` (a store call) on the inbox's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)
