"""The outbox relay: sends each outbox row, under its stable key, until it is sent.

Rows are written in the same transaction as the transition that produces them, so a
notification exists exactly when the transition does. The relay leases due rows (like
workers lease jobs), sends each one, and marks it ``sent``; a failure goes back to
``pending`` with exponential backoff and jitter, and after ``max_attempts`` the row is a
dead letter (``failed``) that ``hookinbox outbox retry KEY`` sends again.

While a row is being sent its lease is renewed (every third of ``lease_seconds``), and
every send is bounded by ``timeout_seconds``: a slow receiver never lets the lease lapse
under a live relay, so a second relay does not send the row at the same time. A relay
killed between sending and marking stops renewing; its lease expires and the row is sent
again with the SAME key as ``Idempotency-Key``, so the receiving service (or a Python
callable, which gets the key) drops the repeat: a repeated delivery from the provider
never produces a second message, and a crash produces at most a repeat by key.
Log lines name the key, kind and a short error code; never the body.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from hookinbox import outbound
from hookinbox.backoff import JITTER, backoff_seconds
from hookinbox.codes import JobCode, error_code_of
from hookinbox.config.notify import NotifierConfig
from hookinbox.config.resources import OutboxSettings
from hookinbox.loading import load_callable
from hookinbox.logs import get_logger
from hookinbox.resources.notify import PREFIX, SWEEP_SECONDS, NoticeSweeper, NotifySender
from hookinbox.store import ClaimedOutbox, Store

log = get_logger("hookinbox.outbox")


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    """What a sender gets: the stable key (pass it on as an idempotency key), the kind
    (``video-ready``), the resource and the small JSON body."""

    key: str
    kind: str
    resource_id: str | None
    body: dict[str, Any]
    attempt: int


class Sender(Protocol):
    async def send(self, message: OutboxMessage) -> None:
        """Deliver the message or raise; the relay retries with backoff."""
        ...


class ForwardSender:
    """POST the body as JSON with ``Idempotency-Key`` = the row's key; any 2xx is sent."""

    def __init__(self, url: str, timeout: float, client: httpx.AsyncClient) -> None:
        self._url = url
        self._timeout = timeout
        self._client = client

    async def send(self, message: OutboxMessage) -> None:
        headers = {
            "idempotency-key": message.key,
            "x-hookinbox-outbox-kind": message.kind,
            "x-hookinbox-attempt": str(message.attempt),
        }
        await outbound.post(
            self._client, self._url, json=message.body, headers=headers, timeout=self._timeout
        )


class CallableSender:
    """A Python function ``fn(message)``, sync (run in a thread) or async. The relay bounds
    each call by ``timeout_seconds`` (``asyncio.wait_for``); a sync function still running
    in its thread at the timeout is abandoned, not stopped, so it must itself give up (the
    row is retried under the same key, which the function dedupes by)."""

    def __init__(self, fn: Callable[[OutboxMessage], Any]) -> None:
        self._fn = fn

    async def send(self, message: OutboxMessage) -> None:
        if inspect.iscoroutinefunction(self._fn):
            await self._fn(message)
            return
        result = await asyncio.to_thread(self._fn, message)
        if inspect.isawaitable(result):
            await result


def build_sender(settings: OutboxSettings, client: httpx.AsyncClient) -> Sender | None:
    if settings.forward is not None:
        return ForwardSender(settings.forward, settings.timeout_seconds, client)
    if settings.handler is not None:
        return CallableSender(load_callable(settings.handler, "outbox.handler"))
    return None


class OutboxRelay:
    def __init__(
        self,
        settings: OutboxSettings,
        store: Store,
        *,
        sender: Sender | None = None,
        name: str | None = None,
        notify: Mapping[str, NotifierConfig] | None = None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._client = httpx.AsyncClient()
        self._sender = sender or build_sender(settings, self._client)
        #: ``[notify.NAME]``: notices swept from the store into the outbox, and their sender.
        self._sweeper = NoticeSweeper(notify, store) if notify else None
        self._notices = NotifySender(notify, self._client) if notify else None
        self._next_sweep = 0.0
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:outbox"
        self._wakeup = asyncio.Event()

    @property
    def enabled(self) -> bool:
        return self._sender is not None or self._notices is not None

    def wake(self) -> None:
        """New rows may be due (a transition in this process just committed)."""
        self._wakeup.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Relay until ``stop`` is set; an outbox with no sender configured does nothing."""
        if not self.enabled:
            await self._client.aclose()
            return
        log.info("outbox_relay_started", relay=self.name)
        try:
            while not stop.is_set():
                try:
                    await self._sweep_when_due()
                    sent = await self.relay_once()
                except Exception as exc:
                    # Whatever the store raised, the relay keeps going (see WorkerPool.run).
                    log.error("outbox_store_error", relay=self.name, error=error_code_of(exc))
                    sent = 0
                if sent:
                    continue
                await self._idle(stop)
        finally:
            await self._client.aclose()
            log.info("outbox_relay_stopped", relay=self.name)

    async def run_stop_now(self) -> None:
        """Stop at once (tests and one-shot callers): closes the HTTP client."""
        stop = asyncio.Event()
        stop.set()
        await self.run(stop)

    async def _sweep_when_due(self) -> None:
        loop = asyncio.get_running_loop()
        if self._sweeper is None or loop.time() < self._next_sweep:
            return
        self._next_sweep = loop.time() + SWEEP_SECONDS
        await self.sweep_notices()

    async def sweep_notices(self) -> int:
        """Write the notices due to ``[notify.*]`` into the outbox; how many."""
        return await self._sweeper.sweep() if self._sweeper is not None else 0

    async def relay_once(self) -> int:
        """Claim a batch of due rows and send them concurrently; how many were claimed."""
        settings = self._settings
        rows = await self._store.outbox.claim_outbox(
            self.name,
            settings.concurrency,
            settings.lease_seconds,
            settings.max_attempts,
            only_notices=self._sender is None,
        )
        if rows:
            await asyncio.gather(*(self._send(row) for row in rows))
        return len(rows)

    async def _idle(self, stop: asyncio.Event) -> None:
        self._wakeup.clear()
        waiters: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(_wait(stop.wait())),
            asyncio.ensure_future(_wait(self._wakeup.wait())),
        ]
        try:
            await asyncio.wait(
                waiters,
                timeout=self._settings.poll_interval_seconds,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def _send(self, row: ClaimedOutbox) -> None:
        sender = self._notices if row.kind.startswith(PREFIX) else self._sender
        fields = {"key": row.key, "kind": row.kind, "attempt": row.attempts}
        message = OutboxMessage(row.key, row.kind, row.resource_id, row.body, row.attempts)
        if sender is None:  # a notice of a notifier since removed from the config
            await self._settle_failure(row, "unknown_notifier", fields)
            return
        renewing = asyncio.create_task(self._renew(row, fields))
        try:
            await asyncio.wait_for(sender.send(message), self._settings.timeout_seconds)
        except Exception as exc:
            code = JobCode.TIMEOUT if isinstance(exc, TimeoutError) else error_code_of(exc)
            await self._settle_failure(row, code, fields)
            return
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
        try:
            ours = await self._store.outbox.finish_outbox(row.key, row.lease_token, "sent")
        except Exception as exc:
            # The lease expires and the row is sent again, under the same key.
            log.error("outbox_mark_failed", **fields, store_error=error_code_of(exc))
            return
        log.info("outbox_sent" if ours else "outbox_lease_lost", **fields)

    async def _renew(self, row: ClaimedOutbox, fields: dict[str, Any]) -> None:
        """Keep the row's lease while it is being sent; stop when it is lost."""
        lease = self._settings.lease_seconds
        while True:
            await asyncio.sleep(max(0.2, lease / 3))
            try:
                if not await self._store.outbox.renew_outbox_lease(row.key, row.lease_token, lease):
                    log.warning("outbox_lease_lost", **fields)
                    return
            except Exception as exc:
                log.warning("outbox_renew_failed", **fields, store_error=error_code_of(exc))

    async def _settle_failure(self, row: ClaimedOutbox, code: str, fields: dict[str, Any]) -> None:
        try:
            if row.attempts >= self._settings.max_attempts:
                await self._store.outbox.finish_outbox(
                    row.key, row.lease_token, "failed", error_code=code
                )
                log.error("outbox_failed", **fields, error=code)
            else:
                delay = backoff_seconds(
                    row.attempts,
                    base=self._settings.backoff_base_seconds,
                    cap=self._settings.backoff_max_seconds,
                    rng=JITTER,
                )
                await self._store.outbox.finish_outbox(
                    row.key, row.lease_token, "pending", error_code=code, delay_seconds=delay
                )
                log.warning("outbox_retry", **fields, error=code, retry_in_s=round(delay, 3))
        except Exception as exc:
            log.error("outbox_settle_failed", **fields, error=code, store_error=error_code_of(exc))


async def _wait(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


async def run_relay(
    settings: OutboxSettings,
    store: Store,
    stop: asyncio.Event,
    notify: Mapping[str, NotifierConfig] | None = None,
) -> None:
    """For ``hookinbox worker``: relay alongside the workers when a sender (or a
    notifier) is configured."""
    await OutboxRelay(settings, store, notify=notify).run(stop)
