"""A fake notification service: what the outbox relay POSTs to. It delivers each
``Idempotency-Key`` once, as an idempotent receiver does, and keeps what it was sent."""

from __future__ import annotations

from collections import Counter
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


class Notifier:
    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.delivered: list[dict[str, Any]] = []
        self.app = Starlette(routes=[Route("/notify", self.notify, methods=["POST"])])

    async def notify(self, request: Request) -> JSONResponse:
        key = request.headers["idempotency-key"]
        self.requests[key] += 1
        if self.requests[key] == 1:
            self.delivered.append({"key": key, **(await request.json())})
        return JSONResponse({"ok": True})
