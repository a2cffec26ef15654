"""The HTTP server of ``hookinbox serve``: uvicorn (uvloop + httptools) with the deadlines
and bounds it lacks.

uvicorn bounds nothing a client controls before the app is called: a connection that
sends nothing, or trickles its request head or body a byte at a time, stays open for
ever (its keep-alive timer runs only between requests), httptools buffers a head of any
size, and ``limit_concurrency`` answers 503 to new requests while the slow connections
that fill it stay. Measured figures and the alternatives weighed are in docs/server.md.

:class:`BoundedHttpToolsProtocol` is uvicorn's own protocol with, per connection:

- a **head deadline**: the request line and headers must arrive within
  ``header_timeout`` (from the connection's start for its first request, from the first
  byte for the next ones), else 408 and close; a connection that sends nothing at all is
  closed silently;
- a **body deadline**: the whole body within ``body_timeout`` of the head, else 408 and
  close (the app sees a disconnect);
- a **keep-alive deadline** between requests (uvicorn's ``timeout_keep_alive``, moved
  here so that one mechanism holds every deadline);
- a **head size bound**: more than ``max_header_bytes`` before the head is complete is
  answered 431 and closed, so at most that much (plus one socket read) is buffered;
- a **connection cap** per process: at ``max_connections``, a new connection closes the
  oldest one that is not in the middle of a request (an idle keep-alive, or a head still
  arriving) and has been so for at least a tick; when there is none (every connection is
  busy with a request, or all just arrived), the new one is answered 503.

A 408 is followed by a **lingering close** (as nginx does): the answer and a FIN are
sent, and whatever the client still sends is read and dropped for at most
``LINGER_SECONDS`` and ``LINGER_BYTES``, so that its kernel does not answer the unread
bytes with a reset that destroys the answer before the client reads it.

Deadlines are not timers per request: each connection notes when its current phase
expires (one float), and one sweep per server, every ``tick`` seconds while connections
exist, closes the expired ones. The fast path pays two attribute stores per request.

Each answer is written through an :class:`AnswerWriter`, which sends its head and body
in one write (uvicorn writes them apart: two system calls per answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import resource
import socket
import sys
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from hookinbox.errors import ConfigError
from hookinbox.logs import get_logger
from hookinbox.metrics import CONNECTIONS_CUT

if TYPE_CHECKING:
    from hookinbox.config import Server

log = get_logger("hookinbox.server")

#: Open files a process needs besides its client connections: the listening socket, the
#: store (SQLite file, WAL and shm; or the PostgreSQL pool), the workers' HTTP client pool,
#: log files, the event loop's own descriptors.
RESERVED_FILES = 256
#: Longest a connection answered 408/431 is kept half-closed, dropping what it still sends.
LINGER_SECONDS = 1.0
#: Most bytes dropped while lingering; a client that sends more is reset.
LINGER_BYTES = 1 << 20

# A connection's phase: where its parser is, which decides its deadline.
_FRESH = 0  # connected, not a byte yet: head deadline, closed silently
_HEAD = 1  # inside a request head: head deadline, 408
_BODY = 2  # head complete, body arriving: body deadline, 408
_QUEUED = 3  # pipelined behind a request still being answered: no deadline (not read)
_BUSY = 4  # request complete, answer pending: no deadline (the app's time, not the client's)
_IDLE = 5  # answered, waiting for the next request: keep-alive deadline, closed silently
_LINGER = 6  # answered 408 and half-closed: what still arrives is read and dropped
#: Phases in which bytes received belong to a head not yet complete.
_HEAD_BYTES_COUNTED = frozenset({_FRESH, _HEAD, _BUSY, _IDLE})
#: Phases a new connection may take the place of, at the cap.
_EVICTABLE = frozenset({_FRESH, _HEAD, _IDLE, _LINGER})


@dataclass(frozen=True)
class ConnectionLimits:
    """Deadlines (seconds) and bounds of one server process (see ``[server]`` config)."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keep_alive_timeout: float = 5.0
    max_header_bytes: int = 65_536
    max_connections: int = 512

    @classmethod
    def from_config(cls, server: Server) -> ConnectionLimits:
        return cls(
            header_timeout=server.header_timeout_seconds,
            body_timeout=server.body_timeout_seconds,
            keep_alive_timeout=server.keep_alive_timeout_seconds,
            max_header_bytes=server.max_header_bytes,
            max_connections=server.max_connections,
        )

    @property
    def tick(self) -> float:
        """How often expired connections are looked for: a quarter of the shortest
        deadline, between 50 ms and 1 s (a deadline is kept to within this)."""
        shortest = min(self.header_timeout, self.body_timeout, self.keep_alive_timeout)
        return min(1.0, max(0.05, shortest / 4))


def _error_answer(status: int, extra: bytes = b"") -> bytes:
    reason = STATUS_LINE[status].split(b" ", 2)[2].strip()
    return b"".join(
        [
            STATUS_LINE[status],
            b"content-type: text/plain; charset=utf-8\r\n",
            extra,
            b"content-length: %d\r\n" % len(reason),
            b"connection: close\r\n\r\n",
            reason,
        ]
    )


_TIMEOUT = _error_answer(408)
_TOO_LARGE = _error_answer(431)
_AT_CAPACITY = _error_answer(503, b"retry-after: 1\r\n")


class _Sweeper:
    """Closes the expired connections of one server, every ``tick`` seconds while it has
    connections (no timer is left behind when the last one goes)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, state: ServerState, tick: float) -> None:
        self._loop = loop
        self._connections = state.connections
        self._tick = tick
        self._handle: asyncio.TimerHandle | None = None

    def ensure_running(self) -> None:
        if self._handle is None:
            self._handle = self._loop.call_later(self._tick, self._sweep)

    def _sweep(self) -> None:
        self._handle = None
        now = self._loop.time()
        for connection in list(self._connections):
            if isinstance(connection, BoundedHttpToolsProtocol) and connection.deadline <= now:
                connection.expire()
        if self._connections:
            self.ensure_running()


_sweepers: weakref.WeakKeyDictionary[ServerState, _Sweeper] = weakref.WeakKeyDictionary()


_base = HttpToolsProtocol  # called directly: cheaper than super() on every request


class AnswerWriter:
    """The transport a request's answer is written through: one ``send()`` for a small
    answer instead of two.

    uvicorn writes the status line and headers on ``http.response.start`` and the body
    on ``http.response.body``, each with its own ``transport.write``: two system calls and
    two TCP segments per answer (uvloop sends at once, with TCP_NODELAY). Here the first
    write of each request (``arm``) is held and goes out with the next one, joined; so
    only the head, never a body, is held, and a stream's chunks pass straight through. A
    held head that nothing follows in the same loop turn (a stream whose first chunk is
    not ready, a ``100 Continue``) is written at the end of that turn; ``close`` writes
    it first. One per connection; everything else is the transport's own."""

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


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with head and body deadlines, a head size bound and
    a connection cap (see the module docstring). Limits come from the uvicorn config's
    ``connection_limits`` (:class:`BoundedConfig`), else the defaults."""

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limits: ConnectionLimits = getattr(config, "connection_limits", DEFAULT_LIMITS)
        #: The loop time at which this connection's current phase expires.
        self.deadline = math.inf
        self._phase = _FRESH
        self._phase_since = 0.0
        self._head_bytes = 0
        self._linger_bytes = 0
        sweeper = _sweepers.get(server_state)
        if sweeper is None:
            sweeper = _sweepers[server_state] = _Sweeper(self.loop, server_state, self.limits.tick)
        self._sweeper = sweeper

    # -- connection -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        at_capacity = len(self.connections) >= self.limits.max_connections
        super().connection_made(transport)
        self._writer = AnswerWriter(transport, self.loop)
        now = self.loop.time()
        self._phase, self._phase_since = _FRESH, now
        self.deadline = now + self.limits.header_timeout
        self._sweeper.ensure_running()
        if at_capacity and not self._evict_one():
            self._cut("refused_at_capacity", 503)
            self._close_with(_AT_CAPACITY)

    def _evict_one(self) -> bool:
        """Close the oldest connection not in the middle of a request, if it has been so
        for at least a tick (a burst of new connections does not evict itself); False
        if there is none."""
        oldest: BoundedHttpToolsProtocol | None = None
        since = self.loop.time() - self.limits.tick
        for other in self.connections:
            if (
                other is not self
                and isinstance(other, BoundedHttpToolsProtocol)
                and other._phase in _EVICTABLE
                and other._phase_since <= since
                and not other.transport.is_closing()
                and (oldest is None or other._phase_since < oldest._phase_since)
            ):
                oldest = other
        if oldest is None:
            return False
        if oldest._phase == _LINGER:  # already answered and counted
            oldest.transport.abort()
            return True
        oldest._cut("evicted_at_capacity", 408 if oldest._phase == _HEAD else None)
        oldest._close_with(_TIMEOUT if oldest._phase == _HEAD else b"")
        return True

    def data_received(self, data: bytes) -> None:
        if self._phase == _LINGER:  # answered and half-closed: dropped, up to a bound
            self._linger_bytes -= len(data)
            if self._linger_bytes < 0:
                self.transport.abort()
            return
        if self._phase in _HEAD_BYTES_COUNTED:
            room = self.limits.max_header_bytes - self._head_bytes
            if len(data) > room:
                # The head must end within `room` bytes: parse those, then look.
                head, data = data[:room], data[room:]
                self._head_bytes += len(head)
                if head:
                    _base.data_received(self, head)
                if self.transport.is_closing():
                    return
                if self._phase in _HEAD_BYTES_COUNTED:
                    self._cut("header_too_large", 431)
                    self._close_with(_TOO_LARGE)  # a flood is not lingered over
                    return
            else:
                self._head_bytes += len(data)
        _base.data_received(self, data)

    # -- parser phases --------------------------------------------------------------
    def on_message_begin(self) -> None:
        _base.on_message_begin(self)
        if self._phase != _FRESH:  # the first request's head counts from the connection
            now = self.loop.time()
            self._phase_since = now
            self.deadline = now + self.limits.header_timeout
        self._phase = _HEAD

    def on_headers_complete(self) -> None:
        previous = self.cycle
        _base.on_headers_complete(self)
        cycle = self.cycle
        if cycle is not previous and cycle is not None:  # a new request (not an upgrade)
            cycle.transport = self._writer  # type: ignore[assignment]
            self._writer.arm()
        if self.pipeline:  # queued behind an answer in progress; reading is paused
            self._phase, self.deadline = _QUEUED, math.inf
        else:
            self._phase = _BODY
            self.deadline = self.loop.time() + self.limits.body_timeout

    def on_message_complete(self) -> None:
        _base.on_message_complete(self)
        self._head_bytes = 0
        cycle = self.cycle
        if cycle is not None and cycle.response_complete and not self.pipeline:
            # Answered before the body was read (413): now it is idle.
            now = self.loop.time()
            self._phase, self._phase_since = _IDLE, now
            self.deadline = now + self.limits.keep_alive_timeout
        else:
            self._phase, self.deadline = _BUSY, math.inf

    def on_response_complete(self) -> None:
        # uvicorn's own, with the keep-alive timer replaced by a deadline.
        self._writer.flush()  # an answer's last write has gone: nothing may stay held
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
            if self._phase == _QUEUED and not self.pipeline:  # its body may now be read
                self._phase = _BODY
                self.deadline = self.loop.time() + self.limits.body_timeout
        elif self._phase == _BUSY:
            now = self.loop.time()
            self._phase, self._phase_since = _IDLE, now
            self.deadline = now + self.limits.keep_alive_timeout

    # -- closing --------------------------------------------------------------------
    def expire(self) -> None:
        """The current phase's deadline has passed."""
        if self._phase == _LINGER:
            self.transport.abort()  # lingered long enough
            return
        if self.transport.is_closing():
            return
        if self._phase in (_HEAD, _BODY):
            self._cut("header_timeout" if self._phase == _HEAD else "body_timeout", 408)
            self._answer_and_linger(_TIMEOUT)
        elif self._phase == _FRESH:
            self._cut("no_request", None)
            self._close_with(b"")
        else:
            self._close_with(b"")  # kept alive long enough: not a cut

    @staticmethod
    def _cut(reason: str, status: int | None) -> None:
        CONNECTIONS_CUT.labels(reason).inc()
        log.info("connection_cut", reason=reason, status=status)

    def _may_answer(self) -> bool:
        """Whether an answer now would be the next thing on the wire: nothing of the
        current request's answer has been written, and no earlier answer is pending."""
        cycle = self.cycle
        if cycle is None:
            return True
        if self._phase == _BODY:  # the cycle is the current request's
            return not cycle.response_started
        return cycle.response_complete  # the cycle is the previous request's

    def _answer_and_linger(self, answer: bytes) -> None:
        """Write ``answer``, half-close, and drop what the client still sends for at most
        ``LINGER_SECONDS`` and ``LINGER_BYTES`` (then it is reset; its EOF closes it
        sooner)."""
        transport = self.transport
        if not (self._may_answer() and transport.can_write_eof()):
            self._close_with(answer)
            return
        transport.write(answer)
        transport.write_eof()
        self._phase = _LINGER
        self._linger_bytes = LINGER_BYTES
        self.deadline = self.loop.time() + LINGER_SECONDS
        self.flow.resume_reading()

    def eof_received(self) -> None:
        if self._phase == _LINGER:
            self.transport.close()
            return
        _base.eof_received(self)

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


DEFAULT_LIMITS = ConnectionLimits()


class BoundedConfig(uvicorn.Config):
    """A uvicorn config that carries the :class:`ConnectionLimits` to the protocol, also
    into the processes of ``--processes N`` (the config is pickled to each)."""

    def __init__(self, app: Any, *, connection_limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.connection_limits = connection_limits


def ensure_open_files(limits: ConnectionLimits) -> None:
    """Raise this process's open-files limit to what ``max_connections`` needs, within
    the hard limit; refuse to start (naming the key) when the hard limit is too low, so
    a full server never fails to accept its own health check for want of descriptors."""
    needed = limits.max_connections + RESERVED_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            fits = hard - RESERVED_FILES
            advice = f"lower it to {fits} or raise" if fits >= 1 else "raise"
            raise ConfigError(
                f"server.max_connections: {limits.max_connections} connections need about "
                f"{needed} open files, and this process may open only {hard} (ulimit -n): "
                f"{advice} the limit"
            )
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def uvicorn_config(
    app: Any, limits: ConnectionLimits, *, host: str, port: int, **kwargs: Any
) -> BoundedConfig:
    """The uvicorn config of hookinbox's server: uvloop, the bounded httptools protocol,
    no websockets, no access log (the app logs each delivery), no server header, and no
    logging set-up of its own."""
    return BoundedConfig(
        app,
        connection_limits=limits,
        host=host,
        port=port,
        loop="auto",
        http=BoundedHttpToolsProtocol,
        ws="none",
        lifespan="on",
        log_level="warning",
        # uvicorn's own loggers propagate to the root, where hookinbox's processes turn
        # them into JSON lines like every other (logs.configure_logging).
        log_config=None,
        access_log=False,
        server_header=False,
        proxy_headers=False,  # the app reads X-Forwarded-For ([server] forwarded_allow_ips)
        **kwargs,
    )


def run_server(
    app: Any,
    limits: ConnectionLimits,
    *,
    host: str,
    port: int,
    processes: int,
    operator: tuple[str, int] | None = None,
) -> None:
    """Serve ``app`` until SIGINT/SIGTERM. With ``processes`` > 1, ``app`` is the import
    string of an app factory that each process calls (``module:function``). ``operator``
    is a second ``(host, port)`` to serve the same app on (``[server] admin_port``; the
    app itself decides which paths each port answers)."""
    ensure_open_files(limits)
    if processes == 1:
        config = uvicorn_config(app, limits, host=host, port=port)
        server = uvicorn.Server(config)
        sockets = None
        if operator is not None:
            sockets = [config.bind_socket(), _operator_socket(config, *operator)]
        with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the SIGINT it caught
            server.run(sockets=sockets)
        if not server.started:
            sys.exit(3)  # uvicorn's STARTUP_FAILURE, as uvicorn.run
        return
    from uvicorn.supervisors import Multiprocess

    config = uvicorn_config(app, limits, host=host, port=port, factory=True, workers=processes)
    sock = config.bind_socket()
    sockets = [sock] if operator is None else [sock, _operator_socket(config, *operator)]
    # uvicorn.run's own sequence; older uvicorn releases also take the target.
    with contextlib.suppress(KeyboardInterrupt):
        if "target" in inspect.signature(Multiprocess).parameters:
            target = uvicorn.Server(config).run
            Multiprocess(config, target=target, sockets=sockets).run()  # type: ignore[call-arg,unused-ignore]
        else:
            Multiprocess(config, sockets=sockets).run()


def _operator_socket(config: uvicorn.Config, host: str, port: int) -> socket.socket:
    """The operator listener's socket, bound as uvicorn binds its own (address reuse,
    inheritable by the processes of ``--processes N``); a port in use is one line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family=family)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"server.admin_port: cannot listen on {host}:{port} ({exc.strerror})"
        ) from None
    sock.set_inheritable(True)
    return sock
