"""``POST /webhooks/{source}``: read the raw body in a stream, within the size limit."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from hookinbox.errors import HookinboxError, PayloadTooLarge
from hookinbox.http.errors import error_response
from hookinbox.logs import get_logger

if TYPE_CHECKING:
    from hookinbox.ingest import Receiver

log = get_logger("hookinbox.http")


async def read_body(request: Request, limit: int) -> bytes:
    """The raw bytes, refused as soon as they pass ``limit`` (never buffered whole first)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge()
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge()
        chunks.append(chunk)
    return b"".join(chunks)


def webhook_endpoint(receiver: Receiver) -> object:
    async def receive_webhook(request: Request) -> Response:
        source = request.path_params["source"]
        started = time.perf_counter()
        request_id = request.headers.get("x-request-id") or uuid.uuid4().hex
        structlog.contextvars.bind_contextvars(request_id=request_id[:64])
        try:
            body = await read_body(request, receiver.max_body_bytes(source))
            headers = {k.lower(): v for k, v in request.headers.items()}
            receipt = await receiver.receive(source, body, headers)
        except HookinboxError as exc:
            log.info("refused", source=source, error=exc.code, status=exc.http_status)
            receiver.metrics.delivery_answered(source, exc.code, started)
            return error_response(exc)
        finally:
            structlog.contextvars.unbind_contextvars("request_id")
        outcome = "conflict" if receipt.conflict else receipt.status
        receiver.metrics.delivery_answered(source, outcome, started)
        return JSONResponse(receipt.as_json())

    return receive_webhook
