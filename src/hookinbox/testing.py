"""Test your handlers without a server: signed requests and an in-process inbox.

As httpx and Starlette ship test clients, hookinbox ships what a test of a webhook
handler needs, with no pytest dependency::

    from hookinbox.testing import InboxTest, signed_request

    async def test_one_crm_task_per_event():
        async with InboxTest(load_config("hookinbox.toml"), services={"crm": fake}) as box:
            first = await box.deliver("openai", {"id": "evt_1", "type": "response.completed"})
            again = await box.deliver("openai", {"id": "evt_1", "type": "response.completed"})
            assert [first.json()["status"], again.json()["status"]] == ["accepted", "duplicate"]
            (job,) = await box.run_jobs()
            assert job.state == "completed"

- :func:`signed_request` signs a body the way the source's provider does (its scheme's
  own signer, the same one ``hookinbox send`` uses), with a secret you give or the
  source's first secret from its environment variable.
- :class:`InboxTest` is the real :class:`~hookinbox.app.Inbox` (receiver, journal, jobs,
  ledger, state machines, outbox) on a temporary SQLite file, called in process through
  ``httpx.ASGITransport``. No worker runs in the background: :meth:`InboxTest.run_jobs`
  runs every due job, one at a time, when the test says so, and
  :meth:`InboxTest.relay_outbox` sends the outbox rows (to a list, unless told
  otherwise). What happened is read back with :meth:`InboxTest.delivery` and
  :meth:`InboxTest.job`, or from ``box.store``.

The source's secret is read from its ``secret_env`` variable when the inbox is built, as
in production: set it in the test's environment first (``monkeypatch.setenv``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from hookinbox.app import Inbox, build_worker_pool
from hookinbox.config import Config, Source
from hookinbox.errors import ConfigError, UnknownSource
from hookinbox.resources.relay import OutboxMessage, OutboxRelay, Sender
from hookinbox.store import DeliveryView, JobDetail, Store
from hookinbox.verify.registry import build_signer
from hookinbox.work.worker import WorkerPool

__all__ = ["InboxTest", "OutboxCapture", "SignedRequest", "signed_request"]


@dataclass(frozen=True)
class SignedRequest:
    """A delivery as the provider would send it: the raw body and its headers."""

    body: bytes
    headers: dict[str, str]


def signed_request(
    source: Source,
    body: bytes | Mapping[str, Any],
    *,
    event_id: str | None = None,
    event_type: str | None = None,
    secret: str | None = None,
    timestamp: float | None = None,
    name: str = "source",
) -> SignedRequest:
    """``body`` (bytes, or a mapping sent as JSON) signed with ``source``'s scheme.

    ``event_id`` and ``event_type`` go where the scheme carries them in headers
    (``webhook-id``, ``X-GitHub-Delivery``, ``X-GitHub-Event``...); a body's own ``id``
    and ``type`` are their defaults. ``timestamp`` (unix seconds, default now) is the
    signed time, so a test can sign one outside the tolerance window. ``secret``
    defaults to the source's first secret from its environment variable.
    """
    raw = body if isinstance(body, bytes) else json.dumps(dict(body)).encode()
    fields = body if isinstance(body, Mapping) else {}
    event_id = event_id or str(fields.get("id") or f"evt_{uuid.uuid4().hex}")
    event_type = event_type or str(fields.get("type") or "test.event")
    if secret is None:
        secrets = source.secrets()
        if not secrets:
            raise ConfigError(
                f"sources.{name}.secret_env: {source.secret_env} is not set; set it or pass secret="
            )
        secret = secrets[0]
    signer = build_signer(name, source, secret)
    stamp = int(time.time() if timestamp is None else timestamp)
    headers = signer.sign(raw, event_id=event_id, event_type=event_type, timestamp=stamp)
    for header in source.fingerprint.headers if source.fingerprint is not None else ():
        headers.setdefault(header, event_id)
    headers.setdefault("content-type", "application/json")
    return SignedRequest(raw, headers)


@dataclass
class OutboxCapture:
    """The default outbox sender of :class:`InboxTest`: keeps every message it is given."""

    messages: list[OutboxMessage] = field(default_factory=list)

    async def send(self, message: OutboxMessage) -> None:
        self.messages.append(message)

    def keys(self) -> list[str]:
        return [message.key for message in self.messages]


class InboxTest:
    """The real inbox in process, on a temporary SQLite file; jobs run when told.

    ``database`` replaces the config's (default: a fresh SQLite file, removed at the end);
    ``services`` are what handlers ask for by name, as for :class:`~hookinbox.app.Inbox`;
    ``outbox`` is the outbox sender (default: an :class:`OutboxCapture`, ``box.outbox``).
    """

    def __init__(
        self,
        config: Config,
        *,
        services: Mapping[str, Any] | None = None,
        database: str | None = None,
        outbox: Sender | None = None,
    ) -> None:
        self._given = config
        self._services = services
        self._database = database
        self.outbox: Any = outbox if outbox is not None else OutboxCapture()
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._inbox: Inbox | None = None
        self._pool: WorkerPool | None = None
        self._relay: OutboxRelay | None = None
        self._client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> InboxTest:
        database = self._database
        if database is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="hookinbox-test-")
            database = f"sqlite:///{Path(self._tmp.name) / 'hookinbox.db'}"
        try:
            await self._start(database)
        except BaseException:
            with contextlib.suppress(Exception):  # the first error is the one to see
                await self.__aexit__(None, None, None)
            raise
        return self

    async def _start(self, database: str) -> None:
        self.config = self._given.model_copy(update={"database": database})
        inbox = Inbox(self.config, run_workers=False)
        self._pool = build_worker_pool(
            self.config,
            inbox.store,
            metrics=inbox.metrics,
            tracing=inbox.tracing,
            services=self._services,
            name="hookinbox-test",
        )
        self._relay = OutboxRelay(
            self.config.outbox, inbox.store, sender=self.outbox, notify=self.config.notify
        )
        self._inbox = inbox
        await inbox.start()
        self._client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=inbox.app), base_url="http://hookinbox.test"
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stop = asyncio.Event()
        stop.set()
        try:
            if self._client is not None:
                await self._client.aclose()
            if self._pool is not None:
                await self._pool.run(stop)  # stopped at once: closes its HTTP client
            if self._relay is not None:
                await self._relay.run(stop)
            if self._inbox is not None:
                await self._inbox.stop()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()

    # -- what the test reaches -------------------------------------------------------
    @property
    def inbox(self) -> Inbox:
        if self._inbox is None:
            raise RuntimeError("use InboxTest in 'async with'")
        return self._inbox

    @property
    def store(self) -> Store:
        return self.inbox.store

    @property
    def client(self) -> httpx.AsyncClient:
        """An HTTP client of the inbox's ASGI app (``/healthz``, ``/metrics``, ...)."""
        if self._client is None:
            raise RuntimeError("use InboxTest in 'async with'")
        return self._client

    # -- delivering ------------------------------------------------------------------
    def sign(
        self,
        source: str,
        body: bytes | Mapping[str, Any],
        **options: Any,
    ) -> SignedRequest:
        """:func:`signed_request` for the config's source named ``source``."""
        found = self.config.source(source)
        if found is None:
            raise UnknownSource(f"no source named {source!r} in the config")
        return signed_request(found, body, name=source, **options)

    async def deliver(
        self,
        source: str,
        body: bytes | Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        sign: bool = True,
        **options: Any,
    ) -> httpx.Response:
        """POST ``body`` to ``/webhooks/{source}``, signed (unless ``sign=False``: then
        ``headers`` are sent as given). Options are those of :func:`signed_request`."""
        if sign:
            request = self.sign(source, body, **options)
            raw, sent = request.body, {**request.headers, **(headers or {})}
        else:
            raw = body if isinstance(body, bytes) else json.dumps(dict(body)).encode()
            sent = dict(headers or {})
        return await self.client.post(f"/webhooks/{source}", content=raw, headers=sent)

    # -- working ---------------------------------------------------------------------
    async def run_jobs(self, *, wait: float = 0.0, limit: int = 1000) -> list[JobDetail]:
        """Run every due job, one at a time, until none is due; each job as it ended up.

        A job that failed and is scheduled for a retry is not due yet: with ``wait``
        (seconds), keep going while such a job waits and ``wait`` has not passed (give
        the test config a small ``backoff_base_seconds``)."""
        assert self._pool is not None
        deadline = time.monotonic() + wait
        lease = self.config.worker.lease_seconds
        ran: list[str] = []
        while len(ran) < limit:
            jobs = await self.store.queue.claim_due_jobs(self._pool.name, 1, lease)
            if jobs:
                await self._pool.run_job(jobs[0])
                if jobs[0].id not in ran:
                    ran.append(jobs[0].id)
                continue
            if time.monotonic() >= deadline or not await self._retry_waiting(ran):
                break
            await asyncio.sleep(0.05)
        found = [await self.store.queue.get_job(job_id) for job_id in ran]
        return [job for job in found if job is not None]

    async def _retry_waiting(self, job_ids: list[str]) -> bool:
        for job_id in job_ids:
            job = await self.store.queue.get_job(job_id)
            if job is not None and job.state == "accepted":
                return True
        return False

    async def relay_outbox(self) -> int:
        """Send every due outbox row once through the outbox sender; how many were sent
        or tried."""
        assert self._relay is not None
        total = 0
        while sent := await self._relay.relay_once():
            total += sent
        return total

    # -- reading back ----------------------------------------------------------------
    async def delivery(self, ref: str, source: str | None = None) -> DeliveryView | None:
        """The journal entry of an event id (or delivery id), with its jobs."""
        return await self.store.journal.get_delivery(ref, source)

    async def job(self, job_id: str) -> JobDetail | None:
        return await self.store.queue.get_job(job_id)
