"""The counting sink: the internal URL hookinbox forwards to, in a process of its own.

It writes one JSON line per POST (Idempotency-Key, X-Hookinbox-Event-Id, delivery id,
attempt, whether the forwarded provider signature still verifies over the raw body, and
what it answered), and answers 200, or, for a small share, 500 or too slowly (after the
route's forward timeout) so that hookinbox's retries are exercised. ``GET /seen/{event_id}``
answers 200 once an event was answered 200, for the recovery probes.

Run by ``processes``: ``python -m chaos.sink --port P --out FILE [...]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from .signing import Signer

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

OK, ERROR, SLOW = "ok", "error", "slow"
#: The sender went away before the whole body arrived (a worker SIGKILLed mid-send).
CUT = "cut"


@dataclass(frozen=True)
class SinkRecord:
    """One POST the sink received."""

    at: float
    key: str
    event_id: str
    delivery_id: str
    attempt: str
    outcome: str
    signed: bool


def read_records(path: Path) -> list[SinkRecord]:
    records: list[SinkRecord] = []
    if not path.exists():
        return records
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                data = json.loads(line)
                records.append(SinkRecord(**data))
    return records


class Sink:
    """The ASGI app: records, then answers ok, error (500) or slow."""

    def __init__(
        self,
        out: TextIO,
        signer: Signer | None,
        error_share: float,
        slow_share: float,
        slow_seconds: float,
        rng: random.Random,
    ) -> None:
        self._out = out
        self._signer = signer
        self._error_share = error_share
        self._slow_share = slow_share
        self._slow_seconds = slow_seconds
        self._rng = rng
        self._answered_ok: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        if scope["method"] == "GET" and path.startswith("/seen/"):
            seen = path.removeprefix("/seen/") in self._answered_ok
            await _answer(send, 200 if seen else 404)
        elif scope["method"] == "GET" and path == "/healthz":
            await _answer(send, 200)
        elif scope["method"] == "POST":
            await self._forward(scope, receive, send)
        else:
            await _answer(send, 404)

    async def _forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        body, complete = await _read_body(receive)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        event_id = headers.get("x-hookinbox-event-id", "")
        draw = self._rng.random()
        outcome = (
            CUT
            if not complete
            else ERROR
            if draw < self._error_share
            else SLOW
            if draw < self._error_share + self._slow_share
            else OK
        )
        record = SinkRecord(
            at=time.time(),
            key=headers.get("idempotency-key", ""),
            event_id=event_id,
            delivery_id=headers.get("x-hookinbox-delivery-id", ""),
            attempt=headers.get("x-hookinbox-attempt", ""),
            outcome=outcome,
            signed=complete and self._signed(headers, body),
        )
        # Recorded before answering: a forward counts from the moment the target has it,
        # even if the worker that sent it dies before reading the answer.
        self._out.write(json.dumps(record.__dict__, separators=(",", ":")) + "\n")
        if outcome == CUT:
            return  # nobody is listening for an answer
        if outcome == ERROR:
            await _answer(send, 500)
            return
        if outcome == SLOW:
            await asyncio.sleep(self._slow_seconds)
        else:
            self._answered_ok.add(event_id)
        await _answer(send, 200)

    def _signed(self, headers: dict[str, str], body: bytes) -> bool:
        if self._signer is None:
            return False
        return self._signer.verify(
            headers.get("webhook-id", ""),
            headers.get("webhook-timestamp", ""),
            headers.get("webhook-signature", ""),
            body,
        )


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The body, and False when the client disconnected before sending all of it."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks), False
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), True


async def _answer(send: Send, status: int) -> None:
    body = b"ok" if status == 200 else b"no"
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))],
        }
    )
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="chaos.sink", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--secret-env", default="")
    parser.add_argument("--error-share", type=float, default=0.0)
    parser.add_argument("--slow-share", type=float, default=0.0)
    parser.add_argument("--slow-seconds", type=float, default=1.5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    secret = os.environ.get(args.secret_env, "") if args.secret_env else ""
    signer = Signer.from_secret(secret) if secret else None
    with args.out.open("a", encoding="utf-8", buffering=1) as out:
        app = Sink(
            out,
            signer,
            args.error_share,
            args.slow_share,
            args.slow_seconds,
            random.Random(args.seed),
        )
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=args.port,
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
        uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
