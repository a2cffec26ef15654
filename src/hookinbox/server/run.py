"""Binding the listeners and running the server processes.

uvicorn is kept for what it does well and publicly: the ASGI lifespan, signals and
graceful shutdown (``uvicorn.Server``), and the supervision of ``--processes N``
(``uvicorn.supervisors.Multiprocess``), each handed sockets bound here. The HTTP
connection is hookinbox's own (:class:`~hookinbox.server.protocol.EdgeProtocol`), given
to uvicorn as its ``http`` protocol class. The range of uvicorn releases this contract
is tested with is pinned in ``pyproject.toml``.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import socket
import sys
from typing import Any

import uvicorn

from hookinbox.errors import ConfigError, InvalidArgument, PortInUse
from hookinbox.metrics import watch_gc_pauses
from hookinbox.server.limits import ConnectionLimits
from hookinbox.server.protocol import EdgeProtocol


class BoundedConfig(uvicorn.Config):
    """A uvicorn config that carries the :class:`ConnectionLimits` to the protocol, also
    into the processes of ``--processes N`` (the config is pickled to each)."""

    def __init__(self, app: Any, *, connection_limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.connection_limits = connection_limits

    def load(self) -> None:
        """Load the app (in each process of ``--processes N``), then set the collector
        up for serving (:func:`settle_heap`): the app is built, the requests have not
        started."""
        super().load()
        settle_heap()


#: Allocations (net of frees) between two young-generation collections while serving;
#: Python's default is 700.
GC_YOUNG_THRESHOLD = 10_000


def settle_heap() -> None:
    """Set the garbage collector up for serving, once the app is built.

    What start-up made (modules, the config, the app: ~80,000 objects) lives as long as
    the process: moved out of the collector's reach (``gc.freeze``), a full collection
    walks only what serving allocated, not all of it again (a 30 ms pause of the whole
    process before, 0.4 ms after; every request in flight waited for it). A request's
    objects are freed by their reference counts, so a young collection mostly walks the
    requests in flight, which survive it: every 10,000 allocations instead of 700, it
    walks them about 14 times less often (a few us of CPU per delivery). The pauses are
    timed into ``hookinbox_gc_pause_seconds``."""
    watch_gc_pauses()
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def uvicorn_config(
    app: Any, limits: ConnectionLimits, *, host: str, port: int, **kwargs: Any
) -> BoundedConfig:
    """The uvicorn config of hookinbox's server: uvloop, hookinbox's own HTTP protocol,
    no websockets, no access log (the app logs each delivery), no logging set-up of its
    own, and no rewriting of the client's address from forwarded headers (the scope's
    ``client`` is the socket's peer; the app decides which proxies it trusts)."""
    return BoundedConfig(
        app,
        connection_limits=limits,
        host=host,
        port=port,
        loop="auto",
        http=EdgeProtocol,
        ws="none",
        lifespan="on",
        log_level="warning",
        # uvicorn's own loggers propagate to the root, where hookinbox's processes turn
        # them into JSON lines like every other (logs.configure_logging).
        log_config=None,
        access_log=False,
        server_header=False,
        date_header=False,  # the protocol writes its own
        proxy_headers=False,
        **kwargs,
    )


def listen(host: str, port: int, host_key: str, port_key: str) -> socket.socket:
    """A socket bound to ``host:port`` as uvicorn binds its own (address reuse,
    inheritable by the processes of ``--processes N``). A port another process listens
    on is :class:`PortInUse` naming it, before anything else starts. ``host_key`` and
    ``port_key`` say where each came from, so the refusal names the one at fault: an
    address that does not resolve or is not this host's is the host's, anything else the
    port's; a config key (``server.port``) is a ConfigError, a command-line option
    (``--port``) an InvalidArgument."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family=family)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(
                f"{port_key}: {host}:{port} is already in use by another process"
            ) from None
        of_host = isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL
        key = host_key if of_host else port_key
        refusal = InvalidArgument if key.startswith("--") else ConfigError
        raise refusal(f"{key}: cannot listen on {host}:{port} ({exc.strerror})") from None
    sock.set_inheritable(True)
    return sock


def run_server(
    app: Any,
    limits: ConnectionLimits,
    sockets: list[socket.socket],
    *,
    processes: int,
) -> None:
    """Serve ``app`` on ``sockets`` (the webhook listener first, then the operator one)
    until SIGINT/SIGTERM; the caller has made room for the connections
    (:func:`~hookinbox.server.limits.ensure_open_files`). With ``processes`` > 1,
    ``app`` is the import string of an app factory that each process calls
    (``module:function``)."""
    host, port = sockets[0].getsockname()[:2]
    if processes == 1:
        config = uvicorn_config(app, limits, host=host, port=port)
        server = uvicorn.Server(config)
        with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the SIGINT it caught
            server.run(sockets=sockets)
        if not server.started:
            sys.exit(3)  # the app's start-up failed (the store): uvicorn's STARTUP_FAILURE
        return
    from uvicorn.supervisors import Multiprocess

    config = uvicorn_config(app, limits, host=host, port=port, factory=True, workers=processes)
    with contextlib.suppress(KeyboardInterrupt):
        Multiprocess(config, sockets=sockets).run()
