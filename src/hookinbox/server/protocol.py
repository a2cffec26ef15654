"""One client connection: read a request, run the app, write its answer, in phases that
each have a deadline and a bound.

| phase | deadline | at the deadline |
|---|---|---|
| fresh (no byte yet) | ``header_timeout`` from the connection | closed, no answer |
| head | ``header_timeout`` (the first request's from the connection) | 408, lingering close |
| body | ``body_timeout`` from the head | 408, lingering close |
| busy (answer pending) | ``write_timeout`` once the client stops reading | cut |
| idle (keep-alive) | ``keep_alive_timeout`` | closed, no answer |
| linger (refused, half-closed) | ``LINGER_SECONDS`` | reset |

One request at a time: bytes that arrive while a request is answered wait, unparsed, in
a buffer bounded by ``max_header_bytes`` (then the connection stops reading), and at most
``PIPELINE_DEPTH`` requests in a row may arrive ahead of their answers. The next request
is read only once the answer before it has been taken by the kernel. Nothing is ever
upgraded; a refusal that leaves body bytes unread closes the connection.

Deadlines are not timers per request: a connection notes when its phase expires (one
float), and one sweep per server, every ``tick`` seconds while it has connections, ends
the expired ones. Each listener (local port) keeps its own connections and cap, so the
webhook port filling up never refuses the operator port.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import re
import socket
import time
import urllib.parse
import weakref
from typing import TYPE_CHECKING, Any, cast

import httptools

from hookinbox.logs import get_logger
from hookinbox.metrics import CONNECTIONS_CUT, REQUEST_RECEIVED
from hookinbox.server.cycle import HIGH_WATER, STATUS_LINE, AnswerWriter, RequestCycle
from hookinbox.server.framing import (
    BAD_HOST,
    HEAD_TOO_LARGE,
    MALFORMED,
    UPGRADE,
    ChunkedBody,
    Refusal,
    body_framing,
)
from hookinbox.server.limits import (
    DEFAULT_LIMITS,
    EMPTY_LINE_BYTES,
    LINGER_BYTES,
    LINGER_SECONDS,
    PIPELINE_DEPTH,
    ConnectionLimits,
)

if TYPE_CHECKING:
    import uvicorn
    from uvicorn.server import ServerState

log = get_logger("hookinbox.server")

_FRESH, _HEAD, _BODY, _BUSY, _IDLE, _LINGER, _CLOSING = range(7)
#: Which connection gives way first at the cap: already answered, then those not inside a
#: request, then heads, then answers the client does not read, then bodies, then the
#: app's own time. Each must have been in its phase for a tick (a burst does not evict
#: itself).
_EVICTION_RANK = {_LINGER: 0, _CLOSING: 0, _FRESH: 1, _IDLE: 2, _HEAD: 3, _BODY: 5, _BUSY: 6}
_STALLED_RANK = 4
#: The bytes an empty line before a request line is made of (CR, LF).
_LINE_ENDS = (13, 10)
_BARE_LF = re.compile(rb"(?<!\r)\n")
#: The kernel's send buffer of a client connection (it doubles it): room for any answer
#: but the largest operator pages, which then leave in a few writes.
SEND_BUFFER = 65_536
#: At most one ``connection_cut`` line per reason in this many seconds.
CUT_LINE_INTERVAL_SECONDS = 1.0


def error_answer(status: int, code: str, extra: bytes = b"") -> bytes:
    """The server's own answer: the status and a short code, and the connection closed."""
    body = code.encode()
    return b"".join(
        [
            STATUS_LINE[status],
            b"content-type: text/plain; charset=utf-8\r\n",
            extra,
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n\r\n",
            body,
        ]
    )


_HEADER_TIMEOUT = error_answer(408, "header_timeout")
_BODY_TIMEOUT = error_answer(408, "body_timeout")
_EVICTED = error_answer(408, "evicted_at_capacity")
_AT_CAPACITY = error_answer(503, "at_capacity", b"retry-after: 1\r\n")

_date: list[Any] = [0, b""]


def _date_header() -> bytes:
    now = int(time.time())
    if _date[0] != now:
        _date[:] = [now, b"date: %s\r\n" % email.utils.formatdate(now, usegmt=True).encode()]
    date: bytes = _date[1]
    return date


class _CutLines:
    """One ``connection_cut`` line per reason a second at most (a sender can be cut as
    fast as it can connect); the next line says how many were left out. Every cut is
    counted in ``hookinbox_connections_cut_total`` whether or not it is logged."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, int]] = {}

    def write(self, reason: str, status: int | None) -> None:
        now = time.monotonic()
        last = self._last.get(reason)
        if last is not None and now - last[0] < CUT_LINE_INTERVAL_SECONDS:
            self._last[reason] = (last[0], last[1] + 1)
            return
        self._last[reason] = (now, 0)
        if last is not None and last[1]:
            log.info("connection_cut", reason=reason, status=status, suppressed=last[1])
        else:
            log.info("connection_cut", reason=reason, status=status)


_cut_lines = _CutLines()


class _Head:
    """What httptools reports of one request head (fed to it whole, once), with the
    headers that frame its body picked out on the way."""

    __slots__ = (
        "codings",
        "complete",
        "expect_continue",
        "headers",
        "hosts",
        "keep_alive",
        "lengths",
        "parser",
        "upgrade",
        "url",
    )

    # The callbacks httptools looks for and this does not want, present so that looking
    # them up is not an AttributeError per request.
    on_message_begin = on_status = on_body = on_message_complete = None
    on_chunk_header = on_chunk_complete = None

    def __init__(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.lengths: list[bytes] = []
        self.codings: list[bytes] = []
        self.hosts = 0
        self.complete = False
        self.expect_continue = False
        self.upgrade = False
        self.keep_alive = True
        self.parser: httptools.HttpRequestParser | None = None

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length":
            self.lengths.append(value)
        elif name == b"transfer-encoding":
            self.codings.append(value)
        elif name == b"expect" and value.lower() == b"100-continue":
            self.expect_continue = True
        elif name == b"upgrade":
            self.upgrade = True
        elif name == b"host":
            self.hosts += 1
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.complete = True
        # Asked here, not after feed_data: a head with no body completes its message in
        # the same feed, and llhttp forgets the message's `Connection: close` (and
        # HTTP/1.0) when it completes.
        if self.parser is not None:
            self.keep_alive = self.parser.should_keep_alive()


class _Edge:
    """The connections of one uvicorn server (all its listeners), by local port, and the
    sweep that ends the expired ones."""

    def __init__(self, loop: asyncio.AbstractEventLoop, tick: float) -> None:
        self.loop = loop
        self.tick = tick
        self.listeners: dict[Any, set[EdgeProtocol]] = {}
        self._handle: asyncio.TimerHandle | None = None

    def listener(self, port: Any) -> set[EdgeProtocol]:
        found = self.listeners.get(port)
        if found is None:
            found = self.listeners[port] = set()
        return found

    def ensure_sweeping(self) -> None:
        if self._handle is None:
            self._handle = self.loop.call_later(self.tick, self._sweep)

    def _sweep(self) -> None:
        self._handle = None
        now = self.loop.time()
        alive = False
        for connections in self.listeners.values():
            for connection in list(connections):
                if connection.deadline <= now or connection.write_deadline <= now:
                    connection.expire(now)
            alive = alive or bool(connections)
        if alive:
            self.ensure_sweeping()


_edges: weakref.WeakKeyDictionary[Any, _Edge] = weakref.WeakKeyDictionary()


class EdgeProtocol(asyncio.Protocol):
    """hookinbox's HTTP/1.1 connection (see the module docstring). Built by uvicorn's
    server for each connection with its documented protocol-class arguments; the
    limits come from the config's ``connection_limits``, else the defaults."""

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if not config.loaded:
            config.load()
        self.app = config.loaded_app
        self.loop = _loop or asyncio.get_event_loop()
        self.limits: ConnectionLimits = getattr(config, "connection_limits", DEFAULT_LIMITS)
        self.server_state = server_state
        self._app_state = app_state
        self._root = config.root_path
        edge = _edges.get(server_state)
        if edge is None:
            edge = _edges[server_state] = _Edge(self.loop, self.limits.tick)
        self._edge = edge
        #: When the current phase expires, and when an answer the client does not read
        #: is given up (loop time).
        self.deadline = math.inf
        self.write_deadline = math.inf
        self.write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._phase = _FRESH
        self._phase_since = 0.0
        self._buf = bytearray()
        self._scanned = 0
        self._cycle: RequestCycle | None = None
        #: The current request's ``REQUEST_RECEIVED`` extension, stamped when it is whole.
        self._received: dict[str, float] = {}
        self._chunks: ChunkedBody | None = None
        self._body_left = 0
        self._body_done = True
        self._pipelined = 0
        #: Bytes of empty lines taken before the request line being read.
        self._empty_bytes = 0
        self._peer_done = False
        self._reading = True
        self._linger_bytes = 0

    # -- connection -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A uvloop transport is not an asyncio.Transport subclass, but is one.
        self.transport = transport = cast(asyncio.Transport, transport)
        self.writer = AnswerWriter(transport, self.loop)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # What the kernel holds of answers a client does not read: without this,
            # loopback and fast links grow it to megabytes and a stalled writer is never
            # seen here (nor cut at the write deadline).
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        local = transport.get_extra_info("sockname")
        peer = transport.get_extra_info("peername")
        # The socket's peer, as it is: forwarded headers are the app's to judge.
        self._server = (str(local[0]), int(local[1])) if isinstance(local, tuple) else None
        self._client = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None
        self._connections = self._edge.listener(local[1] if isinstance(local, tuple) else local)
        at_capacity = len(self._connections) >= self.limits.max_connections
        self._connections.add(self)
        self.server_state.connections.add(self)  # type: ignore[arg-type]
        now = self.loop.time()
        self._phase, self._phase_since = _FRESH, now
        self.deadline = now + self.limits.header_timeout
        self._edge.ensure_sweeping()
        if at_capacity and not self._evict_one(now):
            self._cut("refused_at_capacity", 503)
            self._close_with(_AT_CAPACITY)

    def connection_lost(self, exc: Exception | None) -> None:
        self._connections.discard(self)
        self.server_state.connections.discard(self)
        self.deadline = self.write_deadline = math.inf
        cycle = self._cycle
        if cycle is not None:
            if not cycle.response_complete:
                cycle.disconnected = True
            cycle.event.set()
        self._wake_drain()
        self._buf.clear()

    def eof_received(self) -> bool | None:
        if self._phase == _BUSY:  # the request is whole: answer it, then close
            self._peer_done = True
            return True
        self.transport.close()
        return None

    def pause_writing(self) -> None:
        self.write_paused = True
        self.write_deadline = self.loop.time() + self.limits.write_timeout

    def resume_writing(self) -> None:
        self.write_paused = False
        self.write_deadline = math.inf
        self._wake_drain()
        if self._phase == _IDLE and self._buf:
            self._process()

    async def drain(self) -> None:
        """Until the client has read enough of what was written (or the connection is
        gone: a stalled client is cut at ``write_deadline``)."""
        if not self.write_paused or self.transport.is_closing():
            return
        waiter = self.loop.create_future()
        self._drain_waiters.append(waiter)
        await waiter

    def _wake_drain(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def shutdown(self) -> None:
        """The server is stopping: finish the answer in progress, then close."""
        if self._cycle is not None and self._phase in (_BODY, _BUSY):
            self._cycle.keep_alive = False
        else:
            self.transport.close()

    # -- reading --------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self._phase == _LINGER:  # refused and half-closed: dropped, up to a bound
            self._linger_bytes -= len(data)
            if self._linger_bytes < 0:
                self.transport.abort()
            return
        if self._phase == _CLOSING:
            return
        self._buf += data
        self._process()

    def _process(self) -> None:
        """Read what the buffer holds, as far as the current request allows."""
        buf = self._buf
        while buf and not self.transport.is_closing():
            phase = self._phase
            if phase == _BODY:
                if not self._read_body():
                    return
            elif phase in (_FRESH, _HEAD, _IDLE):
                if self.write_paused:
                    break  # the answers before it are not read: neither is it
                if phase == _IDLE:
                    now = self.loop.time()
                    self._phase_since, self.deadline = now, now + self.limits.header_timeout
                self._phase = _HEAD
                if not self._read_head():
                    break
            else:
                break  # busy: it waits for the answer before it
        self._flow()

    def _read_head(self) -> bool:
        buf = self._buf
        if not self._scanned and buf[0] in _LINE_ENDS and not self._skip_empty_lines():
            return False
        end = buf.find(b"\r\n\r\n", max(0, self._scanned - 3))
        bound = self.limits.max_header_bytes
        if end < 0 or end + 4 > bound:
            if end >= 0 or len(buf) > bound:
                self._refuse(HEAD_TOO_LARGE, linger=False)  # a flood is not lingered over
            elif _BARE_LF.search(buf, max(0, self._scanned - 1)):
                # A line ended by a bare LF: the head it is in is refused once whole, and
                # one ended by bare LFs would never be whole.
                self._refuse(MALFORMED)
            else:
                self._scanned = len(buf)
            return False
        head = bytes(buf[: end + 4])
        del buf[: end + 4]
        self._scanned = 0
        return self._start_request(head)

    def _skip_empty_lines(self) -> bool:
        """Drop the empty lines before a request line, within ``EMPTY_LINE_BYTES``; False
        when the buffer held nothing else (or they were too many: refused). They belong
        to the head's phase: its start and deadline stay those of their first byte."""
        buf = self._buf
        empty = 0
        while empty < len(buf) and buf[empty] in _LINE_ENDS:
            empty += 1
        del buf[:empty]
        self._empty_bytes += empty
        if self._empty_bytes > EMPTY_LINE_BYTES:
            self._refuse(MALFORMED, linger=False)  # a flood is not lingered over
            return False
        return bool(buf)

    def _start_request(self, raw: bytes) -> bool:
        head = _Head()
        parser = head.parser = httptools.HttpRequestParser(head)
        try:
            parser.feed_data(raw)
        except httptools.HttpParserUpgrade:
            self._refuse(UPGRADE)
            return False
        except httptools.HttpParserError:
            self._refuse(MALFORMED)
            return False
        finally:
            head.parser = None  # no cycle between the parser and its callbacks
        if not head.complete:  # no request line (empty lines are dropped before this)
            self._refuse(MALFORMED)
            return False
        self._empty_bytes = 0
        if head.upgrade:
            self._refuse(UPGRADE)
            return False
        version = parser.get_http_version()
        if head.hosts != 1 and (head.hosts or version == "1.1"):
            self._refuse(BAD_HOST)
            return False
        framing = body_framing(head.lengths, head.codings, version)
        if isinstance(framing, Refusal):
            self._refuse(framing)
            return False
        try:
            url = httptools.parse_url(head.url)
        except httptools.HttpParserInvalidURLError:
            self._refuse(MALFORMED)
            return False
        # An absolute-form target with no path ("http://host") names the root.
        raw_path = url.path or b"/"
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        root = self._root
        received: dict[str, float] = {}
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": version,
            "server": self._server,
            "client": self._client,
            "scheme": "http",
            "method": parser.get_method().decode("ascii"),
            "root_path": root,
            "path": root + path,
            "raw_path": root.encode("ascii") + raw_path if root else raw_path,
            "query_string": url.query or b"",
            "headers": head.headers,
            "state": self._app_state.copy(),
            "extensions": {REQUEST_RECEIVED: received},
        }
        self._received = received
        self._chunks = ChunkedBody(self.limits.max_header_bytes) if framing is None else None
        self._body_left = framing or 0
        self._body_done = framing == 0
        cycle = self._cycle = RequestCycle(
            self,
            scope,
            keep_alive=head.keep_alive,
            expect_continue=head.expect_continue,
            more_body=not self._body_done,
        )
        now = self.loop.time()
        if self._body_done:
            received["at"] = time.perf_counter()
            self._phase, self._phase_since, self.deadline = _BUSY, now, math.inf
        else:
            self._phase, self._phase_since = _BODY, now
            self.deadline = now + self.limits.body_timeout
        self.writer.arm()
        task = self.loop.create_task(cycle.run(self.app))
        tasks = self.server_state.tasks
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return True

    def _read_body(self) -> bool:
        """Move body bytes from the buffer to the request; False when it must wait."""
        cycle = self._cycle
        assert cycle is not None
        buf = self._buf
        if self._chunks is not None:
            used = self._chunks.feed(buf, cycle.body)
            if isinstance(used, Refusal):
                self._refuse(used)
                return False
            del buf[:used]
            done = self._chunks.done
        else:
            take = min(self._body_left, len(buf))
            cycle.body += buf[:take]
            del buf[:take]
            self._body_left -= take
            done = not self._body_left
        if done:
            self._body_done = True
            self._received["at"] = time.perf_counter()
            cycle.more_body = False
            now = self.loop.time()
            self._phase, self._phase_since, self.deadline = _BUSY, now, math.inf
        cycle.event.set()
        return done and not cycle.response_complete

    def body_taken(self) -> None:
        """The app took the body read so far: read on, if reading was paused for it."""
        if not self._reading:
            self._flow()

    def _flow(self) -> None:
        """Read on only while what is waiting stays within its bound: the body read ahead
        of the app, or the pipelined bytes waiting behind an answer."""
        if self._phase == _BODY and self._cycle is not None:
            want = len(self._cycle.body) < HIGH_WATER
        else:
            want = len(self._buf) < self.limits.max_header_bytes or self._phase == _LINGER
        if want != self._reading and not self.transport.is_closing():
            self._reading = want
            if want:
                self.transport.resume_reading()
            else:
                self.transport.pause_reading()

    # -- answering ------------------------------------------------------------------
    @property
    def date_header(self) -> bytes:
        return _date_header()

    def response_complete(self, cycle: RequestCycle) -> None:
        """The app's answer is written: read the next request, or close."""
        self.writer.flush()
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        if not self._body_done:  # refused before its body was read: never reused
            self._linger()
            return
        self._cycle = None
        if not cycle.keep_alive or (self._peer_done and not self._buf):
            self._close_gracefully()
            return
        self._pipelined = self._pipelined + 1 if self._buf else 0
        if self._pipelined >= PIPELINE_DEPTH:
            self._cut("pipeline_too_deep", None)
            self._close_gracefully()
            return
        now = self.loop.time()
        self._phase, self._phase_since = _IDLE, now
        self.deadline = now + self.limits.keep_alive_timeout
        self._process()
        if self._peer_done and self._phase != _BUSY and not self.transport.is_closing():
            # The client has sent all it will: the requests it sent whole are answered,
            # one at a time; what is left of one it did not finish never will be.
            self._close_gracefully()

    def close_now(self) -> None:
        self.writer.flush()
        self._close_gracefully()

    def _close_gracefully(self) -> None:
        """Close once what was written has gone; a client that does not read it within
        the write deadline is cut."""
        self.transport.close()
        if self.transport.get_write_buffer_size():
            self._phase, self.deadline = _CLOSING, self.loop.time() + self.limits.write_timeout
        else:
            self.deadline = math.inf

    # -- ending ---------------------------------------------------------------------
    def expire(self, now: float) -> None:
        """A deadline has passed."""
        phase = self._phase
        if self.write_deadline <= now or phase == _CLOSING:
            self._cut("write_stalled", None)
            self.transport.abort()
        elif phase == _LINGER:
            self.transport.abort()  # lingered long enough
        elif self.transport.is_closing():
            self.deadline = math.inf
        elif phase == _HEAD:
            self._cut("header_timeout", 408)
            self._answer_and_linger(_HEADER_TIMEOUT)
        elif phase == _BODY:
            self._cut("body_timeout", 408)
            self._answer_and_linger(_BODY_TIMEOUT)
        elif phase == _FRESH:
            self._cut("no_request", None)
            self._close_with(b"")
        elif phase == _IDLE:
            self._close_with(b"")  # kept alive long enough: not a cut
        else:
            self.deadline = math.inf

    def _evict_one(self, now: float) -> bool:
        """Make room at the cap: end the connection that gives way first (see
        ``_EVICTION_RANK``) among those in their phase for at least a tick; False if
        there is none."""
        since = now - self._edge.tick
        chosen: EdgeProtocol | None = None
        best = (math.inf, math.inf)
        for other in self._connections:
            if other is self or other._phase_since > since:
                continue
            if other.transport.is_closing() and other._phase != _CLOSING:
                continue
            rank = _EVICTION_RANK[other._phase]
            if other._phase == _BUSY and other.write_paused:
                rank = _STALLED_RANK
            key = (rank, other._phase_since)
            if key < best:
                chosen, best = other, key
        if chosen is None:
            return False
        chosen.evict()
        return True

    def evict(self) -> None:
        phase = self._phase
        if phase in (_LINGER, _CLOSING):  # already answered and counted
            self.transport.abort()
            return
        self._cut("evicted_at_capacity", 408 if phase in (_HEAD, _BODY) else None)
        if phase == _BUSY:
            self.transport.abort()
        else:
            self._close_with(_EVICTED if phase in (_HEAD, _BODY) else b"")

    @staticmethod
    def _cut(reason: str, status: int | None) -> None:
        CONNECTIONS_CUT.labels(reason).inc()
        _cut_lines.write(reason, status)

    def _refuse(self, refusal: Refusal, *, linger: bool = True) -> None:
        self._cut(refusal.code, refusal.status)
        answer = error_answer(refusal.status, refusal.code)
        if linger:
            self._answer_and_linger(answer)
        else:
            self._close_with(answer)

    def _may_answer(self) -> bool:
        """Whether an answer of the server's own would be the next thing on the wire."""
        return self._cycle is None or not self._cycle.response_started

    def _answer_and_linger(self, answer: bytes) -> None:
        """Write ``answer`` and linger (see ``_linger``)."""
        if not (self._may_answer() and self.transport.can_write_eof()):
            self._close_with(answer)
            return
        self.transport.write(answer)
        self._linger()

    def _linger(self) -> None:
        """Half-close and drop what the client still sends for at most ``LINGER_SECONDS``
        and ``LINGER_BYTES`` (then it is reset; its EOF closes it sooner), so that its
        kernel does not answer unread bytes with a reset that destroys the answer."""
        if self._cycle is not None:
            self._cycle.disconnected = not self._cycle.response_complete
            self._cycle.event.set()
        self.transport.write_eof()
        self._buf.clear()
        self._phase = _LINGER
        self._linger_bytes = LINGER_BYTES
        self.deadline = self.loop.time() + LINGER_SECONDS
        self.write_deadline = math.inf
        self._flow()

    def _close_with(self, answer: bytes) -> None:
        """Write ``answer`` (unless a response has started) and close. A peer that does
        not read cannot keep the socket: whatever does not fit the kernel's buffer is
        dropped (abort)."""
        transport = self.transport
        if answer and self._may_answer():
            transport.write(answer)
        self.deadline = math.inf
        transport.close()
        if transport.get_write_buffer_size():
            transport.abort()
