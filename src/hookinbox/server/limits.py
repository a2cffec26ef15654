"""The deadlines and bounds of one server process, and the open files they need."""

from __future__ import annotations

import resource
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hookinbox.errors import ConfigError

if TYPE_CHECKING:
    from hookinbox.config import Server

#: Open files a process needs besides its client connections: the listening sockets, the
#: store (SQLite file, WAL and shm; or the PostgreSQL pool), the workers' HTTP client pool,
#: log files, the event loop's own descriptors.
RESERVED_FILES = 256
#: Longest a connection answered 408/400 is kept half-closed, dropping what it still sends.
LINGER_SECONDS = 1.0
#: Most bytes dropped while lingering; a client that sends more is reset.
LINGER_BYTES = 1 << 20
#: Requests a connection may send ahead of their answers, in a row; the one beyond is not
#: read: the connection is closed after the answers before it.
PIPELINE_DEPTH = 8
#: Bytes of empty lines (CRLF, or a bare CR or LF) ignored before a request line (RFC 9112
#: 2.2 asks for at least one line, for clients that end a body with an extra CRLF); more
#: is 400 ``malformed_request``, closed. They count in the head's phase and deadline.
EMPTY_LINE_BYTES = 8


@dataclass(frozen=True)
class ConnectionLimits:
    """Deadlines (seconds) and bounds of one server process (see ``[server]`` config).
    ``max_connections`` is per listener: the operator port has a cap of its own."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keep_alive_timeout: float = 5.0
    max_header_bytes: int = 65_536
    max_connections: int = 512
    write_timeout: float = 10.0

    @classmethod
    def from_config(cls, server: Server) -> ConnectionLimits:
        return cls(
            header_timeout=server.header_timeout_seconds,
            body_timeout=server.body_timeout_seconds,
            keep_alive_timeout=server.keep_alive_timeout_seconds,
            max_header_bytes=server.max_header_bytes,
            max_connections=server.max_connections,
            write_timeout=server.write_timeout_seconds,
        )

    @property
    def tick(self) -> float:
        """How often expired connections are looked for: a quarter of the shortest
        deadline, between 50 ms and 1 s (a deadline is kept to within this)."""
        shortest = min(
            self.header_timeout, self.body_timeout, self.keep_alive_timeout, self.write_timeout
        )
        return min(1.0, max(0.05, shortest / 4))


DEFAULT_LIMITS = ConnectionLimits()


def ensure_open_files(limits: ConnectionLimits, listeners: int = 1) -> None:
    """Raise this process's open-files limit to what ``max_connections`` on each listener
    needs, within the hard limit; refuse to start (naming the key) when the hard limit is
    too low, so a full server never fails to accept its own health check for want of
    descriptors."""
    connections = limits.max_connections * listeners
    needed = connections + RESERVED_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            fits = (hard - RESERVED_FILES) // listeners
            advice = f"lower it to {fits} or raise" if fits >= 1 else "raise"
            raise ConfigError(
                f"server.max_connections: {connections} connections need about "
                f"{needed} open files, and this process may open only {hard} (ulimit -n): "
                f"{advice} the limit"
            )
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
