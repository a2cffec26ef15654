"""An internal service that a forward route POSTs to: it records every request whole and
answers with the statuses it is told to (then 200), optionally slowly."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class RecordingTarget:
    def __init__(self, statuses: list[int] | None = None, delay: float = 0.0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.statuses = list(statuses or [])
        self.delay = delay
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                owner.requests.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                    }
                )
                if owner.delay:
                    time.sleep(owner.delay)
                status = owner.statuses.pop(0) if owner.statuses else 200
                answer = json.dumps({"id": f"internal-{len(owner.requests)}"}).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                except OSError:
                    pass  # the forward gave up waiting

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/internal/hooks"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> RecordingTarget:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
