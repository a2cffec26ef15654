"""A counting stand-in for an external system (a CRM), as its own HTTP server.

``POST /effects`` creates a new effect EVERY time (like an API without idempotency), so
only hookinbox's ledger can keep the count at one. ``GET /effects/{key}`` finds the first
effect made under a key (what a handler's ``find`` asks). ``GET /count`` says how many.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ExternalSystem:
    def __init__(self) -> None:
        self.effects: list[dict[str, Any]] = []
        self.status = 200
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(length)
                if owner.status != 200:
                    self._answer(owner.status, {"error": "unavailable"})
                    return
                with owner._lock:
                    effect = {
                        "id": f"ext-{len(owner.effects) + 1}",
                        "path": self.path,
                        "idempotency_key": self.headers.get("idempotency-key"),
                        "body": raw.decode(errors="replace"),
                    }
                    try:
                        effect["key"] = json.loads(raw).get("key")
                    except (ValueError, AttributeError):
                        effect["key"] = None
                    owner.effects.append(effect)
                self._answer(200, {"id": effect["id"]})

            def do_GET(self) -> None:
                if self.path == "/count":
                    self._answer(200, {"count": len(owner.effects)})
                    return
                key = self.path.removeprefix("/effects/")
                for effect in owner.effects:
                    if effect["key"] == key:
                        self._answer(200, effect)
                        return
                self._answer(404, {"error": "not_found"})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> ExternalSystem:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def count(self, path: str | None = None) -> int:
        return len([e for e in self.effects if path is None or e["path"] == path])
