"""Raw-socket clients and an in-process bounded server for the slow-client scenarios.

Deadlines in these tests are half a second, so every scenario ends in a few seconds; the
server sweeps for expired connections every 0.125 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from hookinbox.app import Inbox
from hookinbox.config import Config
from hookinbox.server import ConnectionLimits, uvicorn_config
from tests.support.processes import HookinboxProcess, free_port, hookinbox_env
from tests.support.signing import SECRET, SECRET_ENV

HOST = "127.0.0.1"
LIMITS = ConnectionLimits(
    header_timeout=0.5,
    body_timeout=0.5,
    keep_alive_timeout=0.5,
    max_header_bytes=4096,
    max_connections=20,
)
#: Longest a deadline may be overrun here: the sweep interval plus a loaded machine.
SLACK = 2.0
HEAD = b"POST /webhooks/test HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
HEALTHZ_CLOSE = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


@dataclass
class Bounded:
    server: uvicorn.Server
    inbox: Inbox
    port: int

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def url(self, source: str = "test") -> str:
        return f"{self.base_url}/webhooks/{source}"

    def open_connections(self) -> int:
        return len(self.server.server_state.connections)


@contextlib.asynccontextmanager
async def bounded_inbox(
    config: Config, limits: ConnectionLimits = LIMITS
) -> AsyncIterator[Bounded]:
    """The real app under hookinbox's own server set-up, inside the test's event loop."""
    inbox = Inbox(config, run_workers=False)
    port = free_port()
    server = uvicorn.Server(uvicorn_config(inbox.app, limits, host=HOST, port=port))
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(15):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.02)
        yield Bounded(server, inbox, port)
    finally:
        server.should_exit = True
        async with asyncio.timeout(20):
            await task


@dataclass
class Outcome:
    """What a raw client saw: the status line's code (None: closed without a word), the
    whole answer, and the seconds from connecting to the server's close."""

    status: int | None
    answer: bytes
    closed_after: float


def status_of(answer: bytes) -> int | None:
    return int(answer.split()[1]) if answer.startswith(b"HTTP/1.1 ") else None


async def trickle(
    port: int, first: bytes = b"", drip: bytes = b"", every: float = 0.05, give_up: float = 10.0
) -> Outcome:
    """Send ``first``, then ``drip`` one byte every ``every`` s, until the server closes."""
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection(HOST, port)
    started = loop.time()

    async def drip_bytes() -> None:
        for i in itertools.count():
            if drip:
                writer.write(drip[i % len(drip) : i % len(drip) + 1])
            await asyncio.sleep(every)

    writer.write(first)
    dripping = asyncio.create_task(drip_bytes())
    answer = b""
    try:
        async with asyncio.timeout(give_up):
            answer = await reader.read()
    except ConnectionError:
        pass
    finally:
        dripping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await dripping
        writer.close()
    return Outcome(status_of(answer), answer, loop.time() - started)


async def half_sent(
    port: int, data: bytes = HEAD
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that sent ``data`` (by default half a request head) and waits."""
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(data)
    await writer.drain()
    return reader, writer


async def answer_to(port: int, request: bytes, timeout: float = 5.0) -> bytes:
    """Send a whole request on a new connection; the answer until the server closes or
    ``timeout`` passes (a kept-alive connection is not waited for)."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(request)
        chunks: list[bytes] = []
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(timeout):
                while chunk := await reader.read(65536):
                    chunks.append(chunk)
        return b"".join(chunks)
    finally:
        writer.close()


#: The short timeouts and bounds a raw-socket test of ``hookinbox serve`` runs under.
SHORT_TIMEOUTS = """\
header_timeout_seconds = 0.5
body_timeout_seconds = 0.5
keep_alive_timeout_seconds = 0.5
max_header_bytes = 4096
max_connections = 50
"""


def write_config(path: Path, db_url: str, port: int, server: str = SHORT_TIMEOUTS) -> Path:
    path.write_text(
        f'database = "{db_url}"\n'
        f'[server]\nhost = "127.0.0.1"\nport = {port}\n{server}'
        f'[sources.test]\nscheme = "standard-webhooks"\nsecret_env = "{SECRET_ENV}"\n'
    )
    return path


def serving_sqlite(tmp_path: Path, settings: str | None = None) -> tuple[HookinboxProcess, int]:
    """``hookinbox serve --no-workers`` on a SQLite file with the ``test`` source, in a
    subprocess, started (the caller waits for it to be healthy and stops it), and its
    port. ``settings``: the ``[server]`` lines after host and port (by default the short
    timeouts)."""
    port = free_port()
    settings = SHORT_TIMEOUTS if settings is None else settings
    config = write_config(tmp_path / "c.toml", f"sqlite:///{tmp_path}/h.db", port, settings)
    server = HookinboxProcess(
        ["serve", "--config", str(config), "--no-workers"],
        hookinbox_env({SECRET_ENV: SECRET}),
        tmp_path / "serve.log",
    ).start()
    return server, port
