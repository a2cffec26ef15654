"""``hookinbox send``: sign test deliveries like the provider would, and send them."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from hookinbox.config import Config
from hookinbox.errors import ConfigError, UnknownSource
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


def event_body(event_id: str, event_type: str, data: dict[str, Any], created: int) -> bytes:
    """An OpenAI-style event envelope."""
    return json.dumps(
        {"object": "event", "id": event_id, "type": event_type, "created_at": created, "data": data}
    ).encode()


async def send_deliveries(config: Config, options: SendOptions) -> list[dict[str, Any]]:
    if options.source is None:
        if len(config.sources) != 1:
            raise ConfigError("--source: name one of the sources: " + ", ".join(config.sources))
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
    body = event_body(event_id, options.event_type, options.data or {}, now)
    headers = signer.sign(body, event_id=event_id, event_type=options.event_type, timestamp=now)
    headers["content-type"] = "application/json"
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
                return {"n": n, "http_status": 0, "error": failure}
            try:
                answer = response.json()
            except ValueError:
                answer = {}
            return {"n": n, "http_status": response.status_code, **answer}

        if options.concurrent:
            return list(await asyncio.gather(*(one(n + 1) for n in range(options.repeat))))
        return [await one(n + 1) for n in range(options.repeat)]


__all__ = ["SendOptions", "event_body", "send_deliveries"]
