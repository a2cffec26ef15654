"""One request and its answer, as the ASGI app sees them: ``receive`` gives the body the
connection has read, ``send`` writes the answer through an :class:`AnswerWriter`.

The connection (:mod:`hookinbox.server.protocol`) reads; this module only hands over
what was read and writes what the app answers. An answer waits for the client to read
(``drain``) only as long as the connection's write deadline: past it the connection is
cut, which wakes the wait.
"""

from __future__ import annotations

import asyncio
import http
import re
from typing import Any, Protocol

from hookinbox.logs import exception_fields, get_logger

log = get_logger("hookinbox.server")

#: Body bytes read ahead of the app before the connection stops reading.
HIGH_WATER = 65_536

_HEADER_NAME = re.compile(b'[\x00-\x1f\x7f()<>@,;:\\[\\]={} \t\\\\"]')
_HEADER_VALUE = re.compile(b"[\x00-\x08\x0a-\x1f\x7f]")


def _status_line(status: int) -> bytes:
    try:
        phrase = http.HTTPStatus(status).phrase.encode()
    except ValueError:
        phrase = b""
    return b"HTTP/1.1 %d %s\r\n" % (status, phrase)


STATUS_LINE = {status: _status_line(status) for status in range(100, 600)}
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_SERVER_ERROR = [
    (b"content-type", b"text/plain; charset=utf-8"),
    (b"content-length", b"21"),
    (b"connection", b"close"),
]


class AnswerWriter:
    """The transport a request's answer is written through: one ``send()`` for a small
    answer instead of two.

    An ASGI app sends the status line and headers (``http.response.start``) and the body
    (``http.response.body``) as two messages; written as they come, that is two system
    calls and two TCP segments per answer (uvloop sends at once, with TCP_NODELAY). Here
    the first write of each request (``arm``) is held and goes out with the next one,
    joined; so only the head, never a body, is held, and a stream's chunks pass straight
    through. A held head that nothing follows in the same loop turn (a stream whose first
    chunk is not ready, a ``100 Continue``) is written at the end of that turn; ``close``
    writes it first. One per connection; everything else is the transport's own."""

    __slots__ = ("_armed", "_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._armed = False
        self._held: bytes | None = None

    def arm(self) -> None:
        """A new request: hold its answer's first write."""
        self._armed = True

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + data)
        elif self._armed:
            self._armed = False
            self._held = data
            self._loop.call_soon(self.flush)
        else:
            self._transport.write(data)

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class Connection(Protocol):
    """What a request needs of its connection (``EdgeProtocol``)."""

    writer: AnswerWriter
    write_paused: bool

    @property
    def date_header(self) -> bytes: ...

    async def drain(self) -> None: ...

    def body_taken(self) -> None: ...

    def response_complete(self, cycle: RequestCycle) -> None: ...

    def close_now(self) -> None: ...


class RequestCycle:
    """One request's body as it arrives and its answer as the app sends it."""

    __slots__ = (
        "_chunked",
        "_connection",
        "_given_all",
        "_length_left",
        "body",
        "disconnected",
        "event",
        "expect_continue",
        "keep_alive",
        "more_body",
        "response_complete",
        "response_started",
        "scope",
        "writer",
    )

    def __init__(
        self,
        connection: Connection,
        scope: dict[str, Any],
        *,
        keep_alive: bool,
        expect_continue: bool,
        more_body: bool,
    ) -> None:
        self._connection = connection
        self.scope = scope
        self.writer = connection.writer
        self.keep_alive = keep_alive
        self.expect_continue = expect_continue
        self.body = bytearray()
        self.more_body = more_body
        self.event = asyncio.Event()
        self.disconnected = False
        self.response_started = False
        self.response_complete = False
        self._chunked: bool | None = None
        self._length_left = 0
        self._given_all = False

    async def run(self, app: Any) -> None:
        try:
            await app(self.scope, self.receive, self.send)
        except BaseException as exc:
            log.error("asgi_exception", **exception_fields(exc))
            if not self.response_started and not self.disconnected:
                await self._send_500()
            else:
                self._connection.close_now()
            if not isinstance(exc, Exception):
                raise
        else:
            if not self.response_started and not self.disconnected:
                log.error("asgi_no_response")
                await self._send_500()
            elif not self.response_complete and not self.disconnected:
                log.error("asgi_incomplete_response")
                self._connection.close_now()

    async def _send_500(self) -> None:
        await self.send({"type": "http.response.start", "status": 500, "headers": _SERVER_ERROR})
        await self.send({"type": "http.response.body", "body": b"Internal Server Error"})

    async def receive(self) -> dict[str, Any]:
        if self.expect_continue and self.more_body and not self.response_started:
            self.expect_continue = False
            self.writer.write(_CONTINUE)
        while not self.disconnected and not self.response_complete:
            if (self.body or not self.more_body) and not self._given_all:
                break
            self._connection.body_taken()
            await self.event.wait()
            self.event.clear()
        if self.disconnected or self.response_complete:
            return {"type": "http.disconnect"}
        body = bytes(self.body)
        self.body.clear()
        self._given_all = not self.more_body
        self._connection.body_taken()
        return {"type": "http.request", "body": body, "more_body": self.more_body}

    async def send(self, message: dict[str, Any]) -> None:
        connection = self._connection
        if connection.write_paused and not self.disconnected:
            await connection.drain()
        if self.disconnected:
            return
        kind = message["type"]
        if not self.response_started:
            if kind != "http.response.start":
                raise RuntimeError(f"Expected 'http.response.start', got {kind!r}")
            self.response_started = True
            self.expect_continue = False
            self.writer.write(self._head(message["status"], message.get("headers", ())))
            return
        if self.response_complete or kind != "http.response.body":
            raise RuntimeError(f"Unexpected ASGI message {kind!r}")
        body: bytes = message.get("body", b"")
        more_body: bool = message.get("more_body", False)
        if self.scope["method"] == "HEAD":
            self._length_left = 0
        elif self._chunked:
            parts = [b"%x\r\n" % len(body), body, b"\r\n"] if body else []
            if not more_body:
                parts.append(b"0\r\n\r\n")
            if parts:
                self.writer.write(b"".join(parts))
        else:
            if len(body) > self._length_left:
                raise RuntimeError("Response content longer than Content-Length")
            self._length_left -= len(body)
            self.writer.write(body)
        if not more_body:
            if self._length_left:
                raise RuntimeError("Response content shorter than Content-Length")
            self.response_complete = True
            self.event.set()
            connection.response_complete(self)

    def _head(self, status: int, headers: Any) -> bytes:
        parts = [STATUS_LINE[status], self._connection.date_header]
        closing = False
        for name, value in headers:
            if _HEADER_NAME.search(name):
                raise RuntimeError("Invalid HTTP header name.")
            if _HEADER_VALUE.search(value):
                raise RuntimeError("Invalid HTTP header value.")
            name = name.lower()
            if name == b"content-length" and self._chunked is None:
                self._length_left = int(value)
                self._chunked = False
            elif name == b"transfer-encoding" and value.lower() == b"chunked":
                self._length_left = 0
                self._chunked = True
            elif name == b"connection" and b"close" in value.lower():
                self.keep_alive = False
                closing = True
            parts += [name, b": ", value, b"\r\n"]
        if not self.keep_alive and not closing:
            parts.append(b"connection: close\r\n")
        if self._chunked is None and self.scope["method"] != "HEAD" and status not in (204, 304):
            self._chunked = True
            parts.append(b"transfer-encoding: chunked\r\n")
        parts.append(b"\r\n")
        return b"".join(parts)
