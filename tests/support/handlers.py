"""Handlers the tests route to, by import path. In-process state is per test process."""

from __future__ import annotations

import asyncio
import collections
import os
import time
from typing import Any

import httpx

from hookinbox.work.actions import Event
from hookinbox.work.effects import JobContext

CALLS: collections.Counter[str] = collections.Counter()
TIMES: dict[str, list[float]] = collections.defaultdict(list)
FINISHED: set[str] = set()


def reset() -> None:
    CALLS.clear()
    TIMES.clear()
    PAYLOADS.clear()
    HEADERS.clear()
    FINISHED.clear()
    ORDERED.clear()
    FAIL_ORDERED.clear()


async def count(event: Event, ctx: JobContext) -> str:
    CALLS[event.event_id] += 1
    TIMES[event.event_id].append(time.monotonic())
    return f"counted-{event.event_id}"


#: The payloads ``record`` was given, by event id.
PAYLOADS: dict[str, dict[str, Any]] = {}
#: The stored headers ``record`` was given, by event id.
HEADERS: dict[str, dict[str, str]] = {}


async def record(event: Event, ctx: JobContext) -> None:
    """Keeps the payload the handler was given (a form's fields, a JSON object)."""
    CALLS[event.event_id] += 1
    PAYLOADS[event.event_id] = event.payload
    HEADERS[event.event_id] = event.headers


def count_sync(event: Event, ctx: Any) -> None:
    CALLS["sync:" + event.event_id] += 1
    ctx.effect(f"sync:{event.event_id}", lambda key: {"id": "sync-" + key})


async def slow(event: Event, ctx: JobContext) -> None:
    CALLS[event.event_id] += 1
    await asyncio.sleep(2)
    FINISHED.add(event.event_id)


class CrmUnavailable(Exception):
    code = "crm_unavailable"


async def always_fails(event: Event, ctx: JobContext) -> None:
    CALLS[event.event_id] += 1
    TIMES[event.event_id].append(time.monotonic())
    # The message quotes the payload: it must never reach a log line.
    raise CrmUnavailable(f"CRM refused {event.payload}")


# -- for worker processes that the tests kill ---------------------------------------------
def _external() -> str:
    return os.environ["HB_TEST_EXTERNAL_URL"]


def _pause_if(point: str) -> None:
    """At the kill point named by HB_TEST_KILL_POINT: say so in a file, then hang."""
    if os.environ.get("HB_TEST_KILL_POINT") == point:
        marker = os.environ["HB_TEST_MARKER"]
        with open(marker, "w") as fh:
            fh.write(point)
        time.sleep(120)


async def crm_task_via_external(event: Event, ctx: JobContext) -> None:
    """Create one task in the external system (the counting double), under a stable key."""

    def create(key: str) -> dict[str, Any]:
        _pause_if("before_call")
        answer = httpx.post(f"{_external()}/effects", json={"key": key}, timeout=10)
        answer.raise_for_status()
        _pause_if("after_call")
        return {"id": answer.json()["id"]}

    def find(key: str) -> dict[str, Any] | None:
        answer = httpx.get(f"{_external()}/effects/{key}", timeout=10)
        if answer.status_code == 404:
            return None
        answer.raise_for_status()
        return {"id": answer.json()["id"]}

    loop = asyncio.get_running_loop()
    await ctx.effect(f"crm-task:{event.event_id}:create", create, find)
    await loop.run_in_executor(None, _pause_if, "after_record")


async def analyze_call(event: Event, ctx: JobContext) -> None:
    """Two events about one call share one business key: call id + analyzer version."""

    async def analyze(key: str) -> dict[str, Any]:
        CALLS["analysis:" + key] += 1
        # The other job's attempt arrives meanwhile: both are claimed at once, and 3 s
        # outlasts a claim's delay on a loaded machine.
        await asyncio.sleep(3.0)
        return {"id": f"analysis-{event.payload['data']['call_id']}"}

    await ctx.effect(f"call-analysis:{event.payload['data']['call_id']}:v2", analyze)
    FINISHED.add(event.event_id)


async def hangs(event: Event, ctx: JobContext) -> None:
    CALLS[event.event_id] += 1
    await asyncio.sleep(3600)


async def returns_no_json(event: Event, ctx: JobContext) -> None:
    def make(key: str) -> object:
        CALLS["made:" + key] += 1
        return {1, 2, 3}  # a set: the effect happened, but this is no JSON

    await ctx.effect(f"odd:{event.event_id}", make)
    await ctx.effect(f"odd:{event.event_id}", make)  # recorded: not made again


def record_to_file(event: Event, ctx: Any) -> None:
    """One line per call, ``source event_id``, appended to ``HB_TEST_CALLS_FILE``: the
    calls of every worker process of a test, counted after they end (O_APPEND: lines of
    several processes never interleave)."""
    fd = os.open(os.environ["HB_TEST_CALLS_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{event.source} {event.event_id}\n".encode())
    finally:
        os.close(fd)


# -- ordered routes --------------------------------------------------------------------
#: Each call of ``ordered``: (key, delivery id, start, end, pid), in the order they ended.
ORDERED: list[tuple[str, str, float, float, int]] = []
#: Event ids ``ordered`` fails for while they are in this set.
FAIL_ORDERED: set[str] = set()


async def ordered(event: Event, ctx: JobContext) -> None:
    """Records each call by the event's ``data.customer`` (its order key), for a little
    while so that two calls of one key would overlap if they ran at once. With
    ``HB_TEST_ORDER_LOG`` set (worker processes), each call is a line appended to that
    file, written in one ``write`` (O_APPEND: lines of processes never interleave)."""
    if event.event_id in FAIL_ORDERED:
        CALLS[event.event_id] += 1
        raise CrmUnavailable("asked to fail")
    start = time.time()
    await asyncio.sleep(0.005)
    end = time.time()
    key = str(event.payload["data"]["customer"])
    CALLS[event.event_id] += 1
    path = os.environ.get("HB_TEST_ORDER_LOG")
    if path:
        line = f"{key}\t{event.delivery_id}\t{event.event_id}\t{start}\t{end}\t{os.getpid()}\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    else:
        ORDERED.append((key, event.delivery_id, start, end, os.getpid()))
