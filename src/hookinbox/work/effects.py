"""The effects ledger: each external effect happens once, under a stable business key.

A handler wraps every external call in ``ctx.effect(key, do, find)``. The ledger row for
``key`` moves ``started -> recorded``:

- recorded: the effect exists; its result is returned and nothing is called;
- started by another job that still holds a live lease: that job is making the effect
  now; this job is deferred (``effect_in_progress``, no attempt spent) and comes back;
- started but never recorded, and nobody holds it: a worker died between the external
  call and the record, so the effect may exist. ``find(key)`` asks the external system;
  what it finds is recorded. Only when it finds nothing (or there is no ``find``) is
  ``do`` called again;
- unknown: the row is started, then ``do(key)`` runs and its result is recorded. When
  ``do`` fails saying nothing was started (``ActionError(..., not_started=True)``, as a
  forward whose target refused the connection does), the row is released again.

``do`` receives the key so it can pass it on as the external API's own idempotency key,
which closes the last gap (a crash after the call, with no ``find``). Results are small
JSON (an id, a status; at most ``MAX_RESULT_BYTES``); the ledger never holds a payload.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hookinbox.codes import JobCode
from hookinbox.errors import ActionError, HookinboxError
from hookinbox.logs import get_logger
from hookinbox.store import Store

log = get_logger("hookinbox.effects")

EffectFn = Callable[[str], Any]


async def _call(fn: EffectFn, key: str) -> Any:
    result = fn(key)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _call_in_thread(fn: EffectFn, key: str) -> Any:
    """For sync handlers: their ``do``/``find`` may block, so never on the event loop."""
    return await asyncio.to_thread(fn, key)


#: The ledger keeps ids and statuses, not documents: a bigger result is not recorded.
MAX_RESULT_BYTES = 16_384


class EffectInProgress(HookinboxError):
    """Another job holds this effect's key and is making it now; retried later."""

    code = JobCode.EFFECT_IN_PROGRESS.value


def _checked_result(result: Any) -> Any:
    """The effect already happened, so its key must be recorded whatever ``do`` returned:
    a result that is not small JSON is recorded as a note saying so (and logged by code),
    never dropped, so a retry cannot make the effect again."""
    try:
        size = len(json.dumps(result))
    except (TypeError, ValueError):
        log.warning("effect_result_not_json")
        return {"unrecorded": "not_json"}
    if size > MAX_RESULT_BYTES:
        log.warning("effect_result_too_large", size=size)
        return {"unrecorded": "too_large"}
    return result


def business_id_of(result: Any) -> str | None:
    if isinstance(result, dict) and result.get("id") is not None:
        return str(result["id"])
    if isinstance(result, str | int):
        return str(result)
    return None


@dataclass(frozen=True, slots=True)
class JobSettled:
    """An action that settled its own job in its own transaction (a resource route:
    the transition and the job's completion commit together) says so here."""

    ours: bool
    state: str  # completed | parked | failed
    outcome: str
    business_id: str | None = None


@dataclass
class JobContext:
    """What a handler gets besides the event: the job's identity and the ledger."""

    store: Store
    job_id: str
    delivery_id: str
    attempt: int
    trigger: str
    #: The id of the last effect's result: becomes the job's business id.
    business_id: str | None = None
    effects: list[str] = field(default_factory=list)
    invoke: Callable[[EffectFn, str], Awaitable[Any]] = _call
    #: The job's lease, for an action that settles the job in its own transaction.
    lease_token: str = ""
    settled: JobSettled | None = None
    #: The application's services (``Inbox(config, services={...})``), read-only.
    services: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    #: A forward's 2xx answer, kept with the attempt: its status and a bounded snippet.
    answer_status: int | None = None
    answer_snippet: str | None = None

    async def effect(self, key: str, do: EffectFn, find: EffectFn | None = None) -> Any:
        """Make the effect under ``key`` once; return its (recorded) result."""
        start = await self.store.effects.start_effect(key, self.job_id)
        if start.record.state == "recorded":
            log.info("effect_skipped", job_id=self.job_id, key_recorded=True)
            return self._note(key, start.record.result)
        if start.held_by_live_job:
            # Another job sharing this business key is making the effect right now:
            # come back after its lease, when it is either recorded or abandoned.
            raise EffectInProgress()
        if start.created:
            result = await self._first_try(key, do)
        else:
            # Started but never recorded, and nobody holds it: a worker died between the
            # external call and the record. Ask the external system before calling again.
            found = await self.invoke(find, key) if find is not None else None
            if found is not None:
                log.info("effect_found", job_id=self.job_id)
                record = await self.store.effects.record_effect(key, _checked_result(found))
                return self._note(key, record.result)
            result = await self.invoke(do, key)
        record = await self.store.effects.record_effect(key, _checked_result(result))
        log.info("effect_recorded", job_id=self.job_id)
        return self._note(key, record.result)

    async def _first_try(self, key: str, do: EffectFn) -> Any:
        """``do`` under a key this attempt just started. When it fails saying the effect
        certainly did not begin (``ActionError(not_started=True)``: a forward whose
        connection was refused), the key is released, so the ledger never shows an effect
        "started and never recorded" that never was. A key started by an earlier attempt
        is kept whatever this one says: that attempt may have reached the target."""
        try:
            return await self.invoke(do, key)
        except ActionError as exc:
            if exc.not_started:
                await self.store.effects.release_effect(key, self.job_id)
            raise

    def _note(self, key: str, result: Any) -> Any:
        self.effects.append(key)
        business_id = business_id_of(result)
        if business_id is not None:
            self.business_id = business_id
        return result


class SyncJobContext:
    """The same ledger for a plain (sync) handler running in a worker thread: each call
    hops to the event loop and blocks this thread until it is done."""

    def __init__(self, inner: JobContext, loop: asyncio.AbstractEventLoop) -> None:
        inner.invoke = _call_in_thread
        self._inner = inner
        self._loop = loop
        self.job_id = inner.job_id
        self.delivery_id = inner.delivery_id
        self.attempt = inner.attempt
        self.trigger = inner.trigger
        self.services = inner.services

    def effect(self, key: str, do: EffectFn, find: EffectFn | None = None) -> Any:
        future = asyncio.run_coroutine_threadsafe(self._inner.effect(key, do, find), self._loop)
        return future.result()
