"""Bounded waits: every wait in the suite ends, with a message saying what never came."""

from __future__ import annotations

import asyncio
from typing import Any

from hookinbox.store import Store


async def wait_for(predicate: Any, timeout: float, what: str, step: float = 0.05) -> None:
    """Await until ``await predicate()`` is truthy, at most ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await predicate():
            return
        await asyncio.sleep(step)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


async def wait_for_status(store: Store, ref: str, status: str, timeout: float = 15) -> None:
    """Await until the delivery ``ref`` (event or delivery id) has ``status``."""

    async def reached() -> bool:
        found = await store.journal.get_delivery(ref)
        return found is not None and found.status == status

    await wait_for(reached, timeout, f"{ref} to be {status}")
