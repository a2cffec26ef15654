"""Local stand-ins of the providers' documented APIs, served by uvicorn on 127.0.0.1 in a
thread of their own, so the providers' SDKs make real HTTP requests to them.

Each stand-in also plays the provider's sender: :meth:`send` POSTs its events, signed
with the source's secret, to a receiver URL and records whether each was delivered
(2xx) or failed (refused connection, any other answer), as the provider's own delivery
log would. ``script`` queues answers for the next API requests of a kind (a 429 with
``Retry-After``, GitHub's rate-limit headers, a 500 outage) before the normal answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import httpx
import orjson
import uvicorn
from standardwebhooks.webhooks import Webhook
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.processes import free_port

#: One scripted answer: (status, headers, JSON body); status 0 answers normally.
Scripted = tuple[int, dict[str, str], Any]
NORMAL: Scripted = (0, {}, None)


class StandIn:
    """The common part: the server thread, the key check, scripted answers, a request log."""

    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.scripts: dict[str, list[Scripted]] = {}
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def routes(self) -> list[Route]:
        raise NotImplementedError

    def script(self, kind: str, *answers: Scripted) -> None:
        with self._lock:
            self.scripts.setdefault(kind, []).extend(answers)

    def scripted(self, request: Request, kind: str) -> Response | None:
        """Logs the request; the next scripted answer of ``kind`` or a 401 for a wrong key,
        else None (answer normally)."""
        self.requests.append((request.method, request.url.path, dict(request.query_params)))
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return JSONResponse({"error": {"message": "Invalid API Key"}}, status_code=401)
        with self._lock:
            queued = self.scripts.get(kind)
            answer = queued.pop(0) if queued else None
        if answer is None or answer[0] == 0:
            return None
        status, headers, body = answer
        return JSONResponse(body, status_code=status, headers=headers)

    def __enter__(self) -> StandIn:
        port = free_port()
        app = Starlette(routes=self.routes())
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve()))
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise AssertionError("the stand-in did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.should_exit = True
        self._thread.join(15)
        assert not self._thread.is_alive(), "the stand-in did not stop"


def _post(url: str, body: bytes, headers: dict[str, str]) -> bool:
    try:
        return httpx.post(url, content=body, headers=headers, timeout=10).is_success
    except httpx.HTTPError:
        return False


# -- Stripe ------------------------------------------------------------------------------
@dataclass
class StripeEvent:
    id: str
    type: str
    created: int
    data: dict[str, Any]
    delivered: bool = False

    def body(self) -> bytes:
        return orjson.dumps(
            {
                "id": self.id,
                "object": "event",
                "api_version": "2025-04-30.basil",
                "created": self.created,
                "data": {"object": self.data},
                "livemode": False,
                "pending_webhooks": 0 if self.delivered else 1,
                "type": self.type,
            }
        )


class StripeStandIn(StandIn):
    """``GET /v1/events``: newest first, ``limit``, ``created[gte]``, ``delivery_success``,
    ``starting_after``, ``has_more`` (https://docs.stripe.com/api/events/list)."""

    def __init__(self, api_key: str = "sk_test_standin_0123456789") -> None:
        super().__init__(api_key)
        self.events: list[StripeEvent] = []

    def add(self, count: int, *, created: int | None = None) -> list[StripeEvent]:
        start = len(self.events)
        made = [
            StripeEvent(
                id=f"evt_{uuid.uuid4().hex[:16]}_{start + i:04d}",
                type="customer.updated",
                created=(created if created is not None else int(time.time())) + start + i,
                data={"id": f"cus_{start + i}", "object": "customer"},
            )
            for i in range(count)
        ]
        self.events += made
        return made

    def send(self, url: str, secret: str, events: list[StripeEvent]) -> None:
        for event in events:
            body = event.body()
            stamp = int(time.time())
            signature = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256)
            headers = {
                "stripe-signature": f"t={stamp},v1={signature.hexdigest()}",
                "content-type": "application/json",
            }
            event.delivered = _post(url, body, headers)

    def routes(self) -> list[Route]:
        return [Route("/v1/events", self.list_events, methods=["GET"])]

    async def list_events(self, request: Request) -> Response:
        answer = self.scripted(request, "list")
        if answer is not None:
            return answer
        q = request.query_params
        limit = int(q.get("limit", "10"))
        found = sorted(self.events, key=lambda e: (e.created, e.id), reverse=True)
        if "created[gte]" in q:
            found = [e for e in found if e.created >= int(q["created[gte]"])]
        if q.get("delivery_success") == "false":
            found = [e for e in found if not e.delivered]
        if "starting_after" in q:
            ids = [e.id for e in found]
            found = found[ids.index(q["starting_after"]) + 1 :]
        page = found[:limit]
        body = b'{"object":"list","url":"/v1/events","has_more":%s,"data":[%s]}' % (
            b"true" if len(found) > limit else b"false",
            b",".join(e.body() for e in page),
        )
        return Response(body, media_type="application/json")


# -- GitHub ------------------------------------------------------------------------------
@dataclass
class GitHubEvent:
    guid: str
    event: str
    payload: dict[str, Any]


@dataclass
class GitHubDelivery:
    id: int
    event: GitHubEvent
    delivered_at: float
    status_code: int
    redelivery: bool = False
    headers: dict[str, str] = field(default_factory=dict)

    def listed(self) -> dict[str, Any]:
        ok = 200 <= self.status_code < 300
        return {
            "id": self.id,
            "guid": self.event.guid,
            "delivered_at": datetime.fromtimestamp(self.delivered_at, UTC).isoformat(),
            "redelivery": self.redelivery,
            "duration": 0.01,
            "status": "OK" if ok else "failed to connect",
            "status_code": self.status_code,
            "event": self.event.event,
            "action": self.event.payload.get("action"),
            "installation_id": None,
            "repository_id": 1,
        }


class GitHubStandIn(StandIn):
    """A repository hook's deliveries (https://docs.github.com/rest/webhooks/repo-deliveries):
    the list (newest first, ``per_page``, ``cursor`` in the ``Link`` header), one delivery
    with its request headers and payload, and a redelivery (``POST .../attempts``: the
    stand-in then sends the signed webhook to the URL it was last sending to)."""

    HOOK = "/repos/acme/shop/hooks/1"

    def __init__(self, api_key: str = "ghp_standin_0123456789abcdef") -> None:
        super().__init__(api_key)
        self.deliveries: list[GitHubDelivery] = []
        self.target: tuple[str, str] | None = None
        self._next_id = 1000

    def add(self, count: int) -> list[GitHubEvent]:
        return [
            GitHubEvent(
                guid=str(uuid.uuid4()),
                event="issues",
                payload={"action": "opened", "issue": {"number": i, "title": f"issue {i}"}},
            )
            for i in range(count)
        ]

    def _deliver(self, event: GitHubEvent, *, redelivery: bool) -> None:
        assert self.target is not None
        url, secret = self.target
        body = orjson.dumps(event.payload)
        headers = {
            "x-github-delivery": event.guid,
            "x-github-event": event.event,
            "x-github-hook-id": "1",
            "x-hub-signature-256": "sha256="
            + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
            "content-type": "application/json",
            "user-agent": "GitHub-Hookshot/standin",
        }
        ok = _post(url, body, headers)
        self._next_id += 1
        self.deliveries.append(
            GitHubDelivery(
                id=self._next_id,
                event=event,
                delivered_at=time.time(),
                status_code=200 if ok else 0,
                redelivery=redelivery,
                headers=headers,
            )
        )

    def send(self, url: str, secret: str, events: list[GitHubEvent]) -> None:
        self.target = (url, secret)
        for event in events:
            self._deliver(event, redelivery=False)

    def routes(self) -> list[Route]:
        base = f"{self.HOOK}/deliveries"
        return [
            Route(base, self.list_deliveries, methods=["GET"]),
            Route(base + "/{id:int}", self.show_delivery, methods=["GET"]),
            Route(base + "/{id:int}/attempts", self.redeliver, methods=["POST"]),
        ]

    async def list_deliveries(self, request: Request) -> Response:
        answer = self.scripted(request, "list")
        if answer is not None:
            return answer
        per_page = int(request.query_params.get("per_page", "30"))
        found = sorted(self.deliveries, key=lambda d: d.id, reverse=True)
        cursor = request.query_params.get("cursor")
        if cursor is not None:
            found = [d for d in found if d.id < int(cursor)]
        page = found[:per_page]
        headers = {}
        if len(found) > per_page:
            query = urlencode({"per_page": per_page, "cursor": page[-1].id})
            headers["link"] = f'<{self.url}{self.HOOK}/deliveries?{query}>; rel="next"'
        return JSONResponse([d.listed() for d in page], headers=headers)

    async def show_delivery(self, request: Request) -> Response:
        answer = self.scripted(request, "show")
        if answer is not None:
            return answer
        wanted = request.path_params["id"]
        found = next((d for d in self.deliveries if d.id == wanted), None)
        if found is None:
            return JSONResponse({"message": "Not Found"}, status_code=404)
        return JSONResponse(
            {
                **found.listed(),
                "url": "https://hooks.example/webhooks/github",
                "request": {"headers": found.headers, "payload": found.event.payload},
                "response": {"headers": {}, "payload": None},
            }
        )

    async def redeliver(self, request: Request) -> Response:
        answer = self.scripted(request, "redeliver")
        if answer is not None:
            return answer
        wanted = request.path_params["id"]
        found = next((d for d in self.deliveries if d.id == wanted), None)
        if found is None:
            return JSONResponse({"message": "Not Found"}, status_code=404)
        await asyncio.to_thread(self._deliver, found.event, redelivery=True)
        return JSONResponse({}, status_code=202)


# -- Svix --------------------------------------------------------------------------------
@dataclass
class SvixMessage:
    id: str
    type: str
    created: float
    payload: dict[str, Any]
    delivered: bool = False


class SvixStandIn(StandIn):
    """``POST /api/v1/app/{app_id}/endpoint/{endpoint_id}/recover`` with ``since``: the
    messages that failed since then are sent again, signed (Standard Webhooks)."""

    def __init__(self, api_key: str = "testsk_standin_0123456789") -> None:
        super().__init__(api_key)
        self.messages: list[SvixMessage] = []
        self.target: tuple[str, str] | None = None
        self.recovered_since: list[str] = []

    def add(self, count: int) -> list[SvixMessage]:
        made = [
            SvixMessage(
                id=f"msg_{uuid.uuid4().hex}",
                type="invoice.paid",
                created=time.time(),
                payload={"type": "invoice.paid", "data": {"n": i}},
            )
            for i in range(count)
        ]
        self.messages += made
        return made

    def _deliver(self, message: SvixMessage) -> None:
        assert self.target is not None
        url, secret = self.target
        body = orjson.dumps({"id": message.id, **message.payload})
        stamp = datetime.now(UTC)
        headers = {
            "webhook-id": message.id,
            "webhook-timestamp": str(int(stamp.timestamp())),
            "webhook-signature": Webhook(secret).sign(message.id, stamp, body.decode()),
            "content-type": "application/json",
        }
        message.delivered = _post(url, body, headers)

    def send(self, url: str, secret: str, messages: list[SvixMessage]) -> None:
        self.target = (url, secret)
        for message in messages:
            self._deliver(message)

    def routes(self) -> list[Route]:
        path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/recover"
        return [Route(path, self.recover, methods=["POST"])]

    async def recover(self, request: Request) -> Response:
        answer = self.scripted(request, "recover")
        if answer is not None:
            return answer
        since_text = orjson.loads(await request.body())["since"]
        self.recovered_since.append(since_text)
        since = datetime.fromisoformat(since_text.replace("Z", "+00:00")).timestamp()
        for message in self.messages:
            if not message.delivered and message.created >= since:
                await asyncio.to_thread(self._deliver, message)
        return JSONResponse(
            {
                "id": "qtask_standin",
                "status": "running",
                "task": "endpoint.recover",
                "updatedAt": datetime.now(UTC).isoformat(),
            },
            status_code=202,
        )
