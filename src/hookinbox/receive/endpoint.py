"""``POST /webhooks/{source}``: read the raw body in a stream, within the size limit.

This is the hot path, so it is a plain ASGI app rather than a Starlette endpoint: it
reads the body straight from ``receive`` (refusing it as soon as it passes the limit,
never buffering it whole first) and answers with two ``send`` calls, without building
Request and Response objects for every delivery.

It answers every request: a refusal with its code, and anything unexpected with 500
``{"error": "internal"}``, one log line naming the exception's class and where it was
raised (never its message or a traceback, whose frames hold the body and headers), and
the count ``hookinbox_deliveries_total{outcome="internal"}``. A request the sender can
shape must never make the server print a traceback.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

import orjson
from starlette.types import Receive, Scope, Send

from hookinbox.errors import HookinboxError, PayloadTooLarge
from hookinbox.http.errors import (
    INTERNAL,
    RETRY_AFTER_SECONDS,
    asks_retry,
    error_body,
    status_of,
    unexpected_error_fields,
)
from hookinbox.ids import new_request_id
from hookinbox.logs import REQUEST_ID, get_logger
from hookinbox.metrics import REQUEST_RECEIVED
from hookinbox.verify.base import QUERY

if TYPE_CHECKING:
    from hookinbox.receive.receiver import Receipt, Receiver

log = get_logger("hookinbox.http")

_JSON = (b"content-type", b"application/json")
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,64}")
_RETRY_AFTER = (b"retry-after", str(RETRY_AFTER_SECONDS).encode())
_NONE: dict[str, Any] = {}


class ClientDisconnected(Exception):
    """The provider hung up before the body was complete; there is nobody to answer."""


async def read_body(receive: Receive, headers: dict[str, str], limit: int) -> bytes:
    """The raw bytes, refused as soon as they pass ``limit``."""
    declared = headers.get("content-length")
    # ASCII digits only, counted before int(): "²" is a digit to str.isdigit().
    if (
        declared is not None
        and declared.isascii()
        and declared.isdigit()
        and (len(declared) > 18 or int(declared) > limit)
    ):
        raise PayloadTooLarge()
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected()
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge()
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def send_json(send: Send, status: int, answer: Any, *, retry_after: bool = False) -> None:
    body = orjson.dumps(answer)
    headers = [_JSON, (b"content-length", str(len(body)).encode())]
    if retry_after:
        headers.append(_RETRY_AFTER)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_preset(send: Send, receipt: Receipt) -> None:
    """The source's own answer; the outcome and the delivery id go in headers."""
    preset = receipt.preset
    assert preset is not None
    headers = [
        (b"content-type", preset.content_type),
        (b"content-length", str(len(preset.body)).encode()),
        (b"x-hookinbox-status", receipt.status.encode()),
    ]
    if receipt.delivery_id:
        headers.append((b"x-hookinbox-delivery-id", receipt.delivery_id.encode()))
    if receipt.conflict:
        headers.append((b"x-hookinbox-conflict", b"true"))
    await send({"type": "http.response.start", "status": preset.status, "headers": headers})
    await send({"type": "http.response.body", "body": preset.body})


class WebhookEndpoint:
    """The ASGI app behind ``Route("/webhooks/{source}")``."""

    def __init__(self, receiver: Receiver) -> None:
        self._receiver = receiver

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        receiver = self._receiver
        source = scope["path_params"]["source"]
        started = time.perf_counter()
        # ASGI servers give header names lower-cased; a repeated header keeps its last value.
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        # The query string, for a scheme that signs the URL (twilio): a pseudo-header no
        # HTTP/1.1 request can set (verify.base.QUERY).
        headers.pop(QUERY, None)
        query = scope.get("query_string", b"")
        if query:
            headers[QUERY] = query.decode("latin-1")
        offered = headers.get("x-request-id")
        # A caller's request id is logged only when it looks like an id, never as free text.
        request_id = offered if offered and _REQUEST_ID.fullmatch(offered) else new_request_id()
        bound = REQUEST_ID.set(request_id)
        try:
            body = await read_body(receive, headers, receiver.max_body_bytes(source))
            # From the whole request, when the server says when it was (see
            # REQUEST_RECEIVED): the wait for the loop counts, a slow upload does not.
            received = (scope.get("extensions") or _NONE).get(REQUEST_RECEIVED)
            if received:
                started = received.get("at", started)
            receipt = await receiver.receive(source, body, headers)
            outcome = "conflict" if receipt.conflict else receipt.status
            answer = receipt.as_json()
        except HookinboxError as exc:
            # The source as configured, or "_unknown": a URL path is no log field.
            label = receiver.metrics.source_label(source)
            status = status_of(exc)
            log.info("refused", source=label, error=exc.code, status=status)
            receiver.metrics.delivery_answered(source, exc.code, started)
            await send_json(send, status, error_body(exc), retry_after=asks_retry(exc))
            return
        except ClientDisconnected:
            log.info("client_disconnected", source=receiver.metrics.source_label(source))
            return
        except Exception as exc:
            label = receiver.metrics.source_label(source)
            log.error("internal_error", source=label, **unexpected_error_fields(exc))
            receiver.metrics.delivery_answered(source, INTERNAL, started)
            await send_json(send, 500, {"error": INTERNAL})
            return
        finally:
            REQUEST_ID.reset(bound)
        receiver.metrics.delivery_answered(source, outcome, started)
        if receipt.preset is not None:
            await send_preset(send, receipt)
            return
        await send_json(send, 200, answer)


class WebhookFastPath:
    """In front of the Starlette app: ``POST /webhooks/{source}`` (or ``{source}/``) goes
    straight to the endpoint, skipping the middleware stack and the route table, which
    cost more per delivery than verifying it; everything else (and the lifespan) goes to
    ``app``.
    Under a Mount, the path is taken relative to ``root_path``, as Starlette does."""

    def __init__(self, endpoint: WebhookEndpoint, app: Any) -> None:
        self._endpoint = endpoint
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            path: str = scope["path"]
            root: str = scope.get("root_path", "")
            if root and path.startswith(root):
                path = path[len(root) :]
            if path.startswith("/webhooks/"):
                # With or without one trailing slash, one endpoint: a redirect would be
                # lost (providers do not follow one on POST) or drop https behind a proxy.
                source = path[len("/webhooks/") :].removesuffix("/")
                if source and "/" not in source:
                    scope["path_params"] = {"source": source}
                    await self._endpoint(scope, receive, send)
                    return
        await self._app(scope, receive, send)
