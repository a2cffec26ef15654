"""An internal service that a forward route POSTs to: it records every request whole and
answers with the statuses it is told to (then 200), optionally slowly (``delays``: the
first requests' own, then ``delay``). A status may come with headers and a body of its
own: ``(429, {"retry-after": "1"}, b"slow down")``."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: One answer: a status, or a status with its headers and body.
Answer = int | tuple[int, dict[str, str], bytes]


class RecordingTarget:
    def __init__(
        self,
        statuses: list[Answer] | None = None,
        delay: float = 0.0,
        delays: list[float] | None = None,
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        #: When each request arrived (time.monotonic()).
        self.arrivals: list[float] = []
        #: Requests being answered right now, and the most at once.
        self.in_flight = 0
        self.max_in_flight = 0
        self._count = threading.Lock()
        self.statuses: list[Answer] = list(statuses or [])
        self.delay = delay
        self.delays = list(delays or [])
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with owner._count:
                    owner.in_flight += 1
                    owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
                    delay = owner.delays.pop(0) if owner.delays else owner.delay
                owner.arrivals.append(time.monotonic())
                owner.requests.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                    }
                )
                if delay:
                    time.sleep(delay)
                # Counted out before the answer is written: once the forward has its
                # answer, this request is no longer in flight here either.
                with owner._count:
                    owner.in_flight -= 1
                given = owner.statuses.pop(0) if owner.statuses else 200
                status, headers, answer = given if isinstance(given, tuple) else (given, {}, b"")
                answer = answer or json.dumps({"id": f"internal-{len(owner.requests)}"}).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    for name, value in headers.items():
                        self.send_header(name, value)
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
