"""What a route runs: a Python handler (sync or async) or a forward to an internal URL."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from hookinbox import outbound
from hookinbox.ids import forward_effect_key
from hookinbox.tracing import NOOP, Tracing
from hookinbox.work.destination_gate import DestinationGate
from hookinbox.work.effects import JobContext, SyncJobContext
from hookinbox.work.handlers import NO_SERVICES, plan_call


@dataclass(frozen=True)
class Event:
    """The event a handler receives. ``payload`` is the verified, parsed body."""

    delivery_id: str
    source: str
    event_id: str
    type: str
    payload: dict[str, Any]
    body: bytes
    headers: dict[str, str]
    attempt: int


class Action(Protocol):
    async def run(self, event: Event, ctx: JobContext) -> str | None:
        """Do the work; return a business id (or None). Raise to fail the attempt."""
        ...


class HandlerAction:
    """``fn(event, ctx, **asked)``: what its signature asks for past ``(event, ctx)`` (a
    typed ``payload``, services by name) is resolved here, once (see :mod:`.handlers`)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        services: Mapping[str, Any] = NO_SERVICES,
        *,
        where: str = "handler",
    ) -> None:
        self._fn = fn
        # An object whose __call__ is async is an async handler too.
        self._is_async = inspect.iscoroutinefunction(fn) or (
            not inspect.isroutine(fn) and inspect.iscoroutinefunction(type(fn).__call__)
        )
        self._call = plan_call(fn, services, where)

    async def run(self, event: Event, ctx: JobContext) -> str | None:
        kwargs = self._call.arguments(event.payload, job_id=ctx.job_id)
        if self._is_async:
            result = await self._fn(event, ctx, **kwargs)
        else:
            sync_ctx = SyncJobContext(ctx, asyncio.get_running_loop())
            call = functools.partial(self._fn, event, sync_ctx, **kwargs)
            result = await asyncio.to_thread(call)
        if isinstance(result, str | int) and not isinstance(result, bool):
            return str(result)
        return ctx.business_id


class ForwardAction:
    """POST the raw body to an internal URL with ``Idempotency-Key`` = the job's stable id.

    Any 2xx is success; any other status, a timeout, a refused connection or a DNS
    failure is a failed attempt with a short code (``http_503``, ``timeout``,
    ``connect_error``), so the worker retries it with backoff and dead-letters it at the end.
    """

    def __init__(
        self,
        url: str,
        timeout: float,
        client: httpx.AsyncClient,
        *,
        tracing: Tracing = NOOP,
        gate: DestinationGate | None = None,
        never: frozenset[str] = frozenset(),
    ) -> None:
        self._url = url
        self._timeout = timeout
        self._client = client
        self._tracing = tracing
        #: Credential headers of every source: never passed on, even from a row stored
        #: before one of them was configured.
        self._never = never
        #: A ``[destinations.NAME]``'s rate, in-flight limit and circuit (or None).
        self._gate = gate

    async def run(self, event: Event, ctx: JobContext) -> str | None:
        """The POST is an effect like any other: recorded in the ledger under the job's
        id, so a replay of a completed delivery does not post again (unless its effects
        are forced), while a failed or interrupted POST is simply made again, under the
        same Idempotency-Key."""

        async def post(key: str) -> dict[str, Any]:
            response = await self.post(event, ctx.job_id)
            ctx.answer_status = response.status_code
            ctx.answer_snippet = outbound.snippet(response.content)
            return {"id": _business_id_from_answer(response)}

        if self._gate is None:
            await ctx.effect(forward_effect_key(ctx.job_id), post)
            return ctx.business_id
        # Before the ledger: a held job leaves no started effect and sends nothing.
        await self._gate.admit(ctx.job_id, ctx.lease_token)
        try:
            await ctx.effect(forward_effect_key(ctx.job_id), post)
        except BaseException as exc:
            await self._gate.release(ctx.job_id, ctx.lease_token, exc)
            raise
        await self._gate.release(ctx.job_id, ctx.lease_token, None)
        return ctx.business_id

    async def send(self, event: Event, job_id: str) -> str | None:
        """One POST; the target's ``{"id": ...}`` answer, or a failed attempt's code."""
        return _business_id_from_answer(await self.post(event, job_id))

    async def post(self, event: Event, job_id: str) -> httpx.Response:
        """One POST; the target's 2xx answer, or a failed attempt's code.

        The provider's headers go on as the bytes they came as; the event id and type,
        which may be any text (docs/edge.md), percent-encoded (:func:`outbound.header_text`).
        """
        headers = {
            outbound.header_bytes(name): outbound.header_bytes(value)
            for name, value in event.headers.items()
            if name not in self._never
        }
        headers[b"idempotency-key"] = job_id.encode()  # ids of our own: ASCII
        headers[b"x-hookinbox-delivery-id"] = event.delivery_id.encode()
        headers[b"x-hookinbox-event-id"] = outbound.header_text(event.event_id).encode()
        headers[b"x-hookinbox-event-type"] = outbound.header_text(event.type).encode()
        headers[b"x-hookinbox-attempt"] = str(event.attempt).encode()
        headers.setdefault(b"content-type", b"application/json")
        # The target's traceparent is the forward span's (when tracing is on).
        with self._tracing.forward(self._url, headers) as span:
            span.set("hookinbox.delivery_id", event.delivery_id)
            response = await outbound.post(
                self._client, self._url, content=event.body, headers=headers, timeout=self._timeout
            )
            span.set("http.response.status_code", response.status_code)
        return response


def _business_id_from_answer(response: httpx.Response) -> str | None:
    """An internal service may answer ``{"id": ...}``: that becomes the business id."""
    if "json" not in response.headers.get("content-type", ""):
        return None
    try:
        answer = json.loads(response.content)
    except ValueError:
        return None
    if isinstance(answer, dict) and isinstance(answer.get("id"), str | int):
        return str(answer["id"])
    return None
