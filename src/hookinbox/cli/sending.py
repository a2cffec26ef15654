"""``hookinbox send``: sign test deliveries like the provider would, and send them."""

from __future__ import annotations

import asyncio
import copy
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx

from hookinbox.config import Config, Source
from hookinbox.config.schemes import EventFields, FingerprintPolicy, HmacOptions
from hookinbox.errors import ConfigError, InvalidArgument, UnknownSource
from hookinbox.payload import MISSING, resolve_pointer
from hookinbox.verify.registry import build_signer


@dataclass(frozen=True)
class SendOptions:
    url: str | None = None
    source: str | None = None
    event_type: str = "test.event"
    event_id: str | None = None
    data: dict[str, Any] | None = None
    repeat: int = 1
    concurrent: bool = False
    tamper: bool = False
    scheme: str | None = None


def event_body(event_id: str, event_type: str, data: dict[str, Any]) -> bytes:
    """An OpenAI-style (Standard Webhooks) event envelope."""
    return _dumps({"object": "event", "id": event_id, "type": event_type, "data": data})


def stripe_body(event_id: str, event_type: str, data: dict[str, Any]) -> bytes:
    """A Stripe Event object: the id and type at the top, the resource in data.object."""
    return _dumps({"id": event_id, "object": "event", "type": event_type, "data": {"object": data}})


def slack_body(event_id: str, event_type: str, data: dict[str, Any]) -> bytes:
    """A Slack Events API envelope; ``--type url_verification`` sends the challenge request
    Slack sends when a Request URL is saved (the challenge is the id)."""
    if event_type == "url_verification":
        return _dumps({"type": "url_verification", "challenge": event_id})
    event = {**data, "type": event_type}
    return _dumps({"type": "event_callback", "event_id": event_id, "event": event})


def hmac_body(
    options: HmacOptions | EventFields,
    fingerprint: FingerprintPolicy | None,
    event_id: str,
    event_type: str,
    data: dict[str, Any],
) -> bytes:
    """``--data`` with the id and the type written where the source reads them.

    ``--id`` goes to ``id_pointer`` and ``--type`` to ``type_pointer`` (unless headers carry
    them: the signer sets those). A fingerprint field that ``--data`` does not fill gets
    the type when it is the type's pointer, else the id, so one id gives one fingerprint.
    """
    body = copy.deepcopy(data)
    if options.id_header is None and options.id_pointer is not None:
        _set_pointer(body, options.id_pointer, event_id)
    if options.type_header is None and options.type_pointer is not None:
        _set_pointer(body, options.type_pointer, event_type)
    for pointer in fingerprint.fields if fingerprint is not None else ():
        if resolve_pointer(body, pointer) is MISSING:
            _set_pointer(body, pointer, event_type if pointer == options.type_pointer else event_id)
    return _dumps(body)


def delivery_body(source: Source, event_id: str, event_type: str, data: dict[str, Any]) -> bytes:
    """The body the source's provider would send for this event. It depends only on the
    id, the type and the data -- no clock -- so a repeat of an id is the same bytes, as a
    provider's retry is (the signed timestamp, in the headers, may change)."""
    scheme = source.scheme
    if scheme == "sdk" and source.sdk is not None and source.sdk.provider == "stripe":
        scheme = "stripe"
    if scheme == "stripe":
        return stripe_body(event_id, event_type, data)
    if scheme == "slack":
        return slack_body(event_id, event_type, data)
    if scheme in ("github", "shopify"):
        return _dumps(data)  # the id and the type travel in headers (see their signers)
    if scheme == "hmac" and source.hmac is not None:
        return hmac_body(source.hmac, source.fingerprint, event_id, event_type, data)
    if scheme in ("basic", "api-key"):
        fields = source.credentials or EventFields()
        return hmac_body(fields, source.fingerprint, event_id, event_type, data)
    if scheme == "twilio" and source.twilio is not None:
        return twilio_body(source.twilio, source.fingerprint, event_id, event_type, data)
    return event_body(event_id, event_type, data)


def twilio_body(
    options: EventFields,
    fingerprint: FingerprintPolicy | None,
    event_id: str,
    event_type: str,
    data: dict[str, Any],
) -> bytes:
    """A form as Twilio posts it: ``--data``'s fields, the id and type where the source
    reads them (``/MessageSid`` is the field ``MessageSid``)."""
    fields = json.loads(hmac_body(options, fingerprint, event_id, event_type, data))
    return urlencode(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in fields.items()}
    ).encode()


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def _set_pointer(body: dict[str, Any], pointer: str, value: str) -> None:
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]
    node = body
    for token in tokens[:-1]:
        child = node.setdefault(token, {})
        if not isinstance(child, dict):
            raise InvalidArgument(f"--data: {pointer} passes through a value that is not an object")
        node = child
    node[tokens[-1]] = value


async def send_deliveries(config: Config, options: SendOptions) -> list[dict[str, Any]]:
    if options.source is None:
        # What the command line left out, not what the config got wrong: a usage error.
        if len(config.sources) != 1:
            raise InvalidArgument("--source: name one of the sources: " + ", ".join(config.sources))
        name = next(iter(config.sources))
    else:
        name = options.source
    source = config.source(name)
    if source is None:
        raise UnknownSource(f"no source named {name!r} in the config")
    if options.scheme is not None:
        source = source.model_copy(update={"scheme": options.scheme})
    secrets = source.secrets()
    if not secrets:
        raise ConfigError(f"sources.{name}.secret_env: {source.secret_env} is not set")
    signer = build_signer(name, source, secrets[0])
    base = options.url or f"http://{config.server.host}:{config.server.port}"
    url = f"{base.rstrip('/')}/webhooks/{name}"
    event_id = options.event_id or f"evt_{uuid.uuid4().hex}"
    now = int(time.time())
    body = delivery_body(source, event_id, options.event_type, options.data or {})
    headers = signer.sign(body, event_id=event_id, event_type=options.event_type, timestamp=now)
    for header in source.fingerprint.headers if source.fingerprint is not None else ():
        headers.setdefault(header, event_id)
    headers.setdefault("content-type", "application/json")
    if options.tamper:
        body = body.replace(b'"data": {', b'"data": {"tampered": true, ', 1)
        if b"tampered" not in body:
            body = body + b" "

    async with httpx.AsyncClient(timeout=30) as client:

        async def one(n: int) -> dict[str, Any]:
            try:
                response = await client.post(url, content=body, headers=headers)
            except httpx.HTTPError as exc:
                failure = f"connection failed: {type(exc).__name__}"
                return {"n": n, "http_status": 0, "error": failure, "url": url}
            try:
                answer = response.json()
            except ValueError:
                answer = {}
            if not isinstance(answer, dict) or "x-hookinbox-status" in response.headers:
                # A source's own answer body (TwiML, a Slack message): the outcome and the
                # delivery id are in headers.
                answer = {
                    "status": response.headers.get("x-hookinbox-status"),
                    "delivery_id": response.headers.get("x-hookinbox-delivery-id"),
                }
                if response.headers.get("x-hookinbox-conflict") == "true":
                    answer["conflict"] = True
            return {"n": n, "http_status": response.status_code, **answer}

        if options.concurrent:
            return list(await asyncio.gather(*(one(n + 1) for n in range(options.repeat))))
        return [await one(n + 1) for n in range(options.repeat)]


__all__ = [
    "SendOptions",
    "delivery_body",
    "event_body",
    "hmac_body",
    "send_deliveries",
    "slack_body",
    "stripe_body",
    "twilio_body",
]
