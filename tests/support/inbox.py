"""The real inbox under a real uvicorn socket server, inside the test's event loop, and the
config most tests start from."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

from hookinbox.app import Inbox
from hookinbox.config import Config, config_from_mapping
from hookinbox.server import ConnectionLimits, uvicorn_config
from tests.support.processes import free_port
from tests.support.signing import SECRET_ENV


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
