"""Slow and abusive clients against `hookinbox serve` on SQLite: figures, not a test.

Starts `hookinbox serve --no-workers` on a free 127.0.0.1 port (its own process group,
stopped by its pid) and runs, one at a time:

  trickle-head   N connections send a request head at 1 byte/s
  trickle-body   N connections send a complete head, then the body at 1 byte/s
  idle           N connections open and send nothing
  fd             the server under a low open-files limit (--nofile), with more
                 half-sent requests than that limit allows; then /healthz
  big-headers    20 requests with 16 MB of headers (one huge value, or many headers)

While each slow scenario runs, /healthz is asked every 0.5 s on a fresh connection; the
report gives how many answered and the slowest answer. For each slow connection it gives
when the server closed it (or that it never did) and the status it answered, if any.

    .venv/bin/python bench/slow_clients.py                  # all, 20 s of trickle
    .venv/bin/python bench/slow_clients.py trickle-head --seconds 60 --conns 50
    .venv/bin/python bench/slow_clients.py fd --nofile 256 --conns 300
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"
PY = Path(sys.executable)
HOOKINBOX = PY.parent / "hookinbox"
CONFIG = """\
database = "sqlite:///{tmp}/slow.db"
{server}
[sources.bench]
scheme = "standard-webhooks"
secret_env = "BENCH_SECRET"

[[sources.bench.routes]]
events = ["*"]
action = "noop"
handler = "hookinbox.examples:noop"
"""
HEAD = b"POST /webhooks/bench HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


class Serve:
    """`hookinbox serve` in its own session; stopped by its own pid only."""

    def __init__(self, tmp: Path, nofile: int | None, server_toml: str) -> None:
        self.port = free_port()
        config = tmp / "slow.toml"
        config.write_text(CONFIG.format(tmp=tmp, server=server_toml))
        self.cmd = [str(HOOKINBOX), "serve", "--config", str(config), "--no-workers"]
        self.cmd += ["--host", HOST, "--port", str(self.port)]
        self.log = tmp / "serve.log"
        self.nofile = nofile
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        nofile = self.nofile

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        env = {**os.environ, "BENCH_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.cmd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=limit,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"serve exited: {self.log.read_text()[-2000:]}")
            if asyncio.run(healthz(self.port, 1.0))[0] == 200:
                return
            time.sleep(0.1)
        raise SystemExit("serve did not answer /healthz in 30 s")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


class Attached:
    """A server this script did not start: measured, never stopped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def poll(self) -> int:
        return 0


async def healthz(port: int, timeout: float) -> tuple[int, float]:
    """(status or 0 on failure, seconds) of GET /healthz on a fresh connection."""
    started = time.perf_counter()
    writer = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            line = await reader.readline()
            status = int(line.split()[1]) if line.startswith(b"HTTP/") else 0
    except (OSError, TimeoutError, ValueError, IndexError):
        status = 0
    finally:
        if writer is not None:
            writer.close()
    return status, time.perf_counter() - started


@dataclass
class Probe:
    answers: list[tuple[int, float]] = field(default_factory=list)

    async def run(self, port: int, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.answers.append(await healthz(port, 2.0))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)

    def summary(self) -> str:
        ok = [t for s, t in self.answers if s == 200]
        worst = max(ok) * 1000 if ok else float("nan")
        return f"/healthz {len(ok)}/{len(self.answers)} answered 200, slowest {worst:.0f} ms"


@dataclass
class Slow:
    closed_after: float | None = None
    status: int | None = None
    refused: bool = False


async def slow_connection(
    port: int, first: bytes, trickle: bytes, seconds: float, rate: float
) -> Slow:
    """Send ``first``, then ``trickle`` one byte per 1/rate s; note when the server hangs up."""
    result = Slow()
    started = time.monotonic()
    try:
        reader, writer = await asyncio.open_connection(HOST, port)
    except OSError:
        result.refused = True
        return result
    try:
        if first:
            writer.write(first)
        for i in range(int(seconds * rate)):
            if trickle:
                writer.write(trickle[i % len(trickle) : i % len(trickle) + 1])
            try:
                data = await asyncio.wait_for(reader.read(65536), 1 / rate)
            except TimeoutError:
                continue
            if data.startswith(b"HTTP/"):
                result.status = int(data.split()[1])
                # An answer to a request never sent whole: wait (briefly) for the close.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(reader.read(), 5)
            result.closed_after = time.monotonic() - started
            return result
    except (ConnectionError, TimeoutError):
        result.closed_after = time.monotonic() - started
    finally:
        writer.close()
    return result


def report_slow(name: str, results: list[Slow], seconds: float) -> str:
    closed = [r.closed_after for r in results if r.closed_after is not None]
    refused = sum(r.refused for r in results)
    statuses: dict[int | None, int] = {}
    for r in results:
        if r.closed_after is not None:
            statuses[r.status] = statuses.get(r.status, 0) + 1
    never = len(results) - len(closed) - refused
    when = (
        f"closed after {min(closed):.1f}..{max(closed):.1f} s "
        f"(median {statistics.median(closed):.1f})"
        if closed
        else "none closed"
    )
    return (
        f"{name}: {len(results)} connections, {when}, answers {statuses}, "
        f"still open after {seconds:.0f} s: {never}, refused at connect: {refused}"
    )


async def slow_scenario(
    serve: Serve, name: str, make: Callable[[], Awaitable[Slow]], conns: int, seconds: float
) -> None:
    stop = asyncio.Event()
    probe = Probe()
    probing = asyncio.create_task(probe.run(serve.port, stop))
    fds_before = open_fds(serve.pid)
    tasks = [asyncio.create_task(make()) for _ in range(conns)]
    await asyncio.sleep(min(2.0, seconds / 2))
    fds_during = open_fds(serve.pid)
    results = await asyncio.gather(*tasks)
    stop.set()
    await probing
    print(report_slow(name, results, seconds))
    print(f"  {probe.summary()}; server fds {fds_before} -> {fds_during} during")


def send_and_read_status(port: int, request: bytes) -> int:
    """Send as much of ``request`` as the server takes; its status code (0: none)."""
    with socket.create_connection((HOST, port), timeout=30) as sock:
        sent = 0
        try:
            while sent < len(request):
                sent += sock.send(request[sent : sent + 65536])
        except OSError:
            pass  # refused part-way: the answer, if any, is waiting to be read
        try:
            line = sock.recv(100)
        except OSError:
            return 0
    return int(line.split()[1]) if line.startswith(b"HTTP/") else 0


async def big_headers(serve: Serve, many: bool, count: int = 20, size: int = 16 << 20) -> None:
    before = rss_mb(serve.pid)
    statuses: dict[int, int] = {}
    started = time.perf_counter()
    for _ in range(count):
        if many:
            line = b"X-Filler: " + b"a" * 8180 + b"\r\n"
            head = HEAD + line * (size // len(line)) + b"Content-Length: 2\r\n\r\n{}"
        else:
            head = HEAD + b"X-Filler: " + b"a" * size + b"\r\nContent-Length: 2\r\n\r\n{}"
        status = await asyncio.to_thread(send_and_read_status, serve.port, head)
        statuses[status] = statuses.get(status, 0) + 1
    took = time.perf_counter() - started
    await asyncio.sleep(0.5)
    after = rss_mb(serve.pid)
    kind = "8 KB headers" if many else "one huge header"
    print(
        f"big-headers ({kind}): {count} x {size >> 20} MB -> answers {statuses} "
        f"(0 = reset/none) in {took:.1f} s; RSS {before:.0f} -> {after:.0f} MB"
    )
    h = await healthz(serve.port, 2.0)
    print(f"  /healthz after: {h[0]} in {h[1] * 1000:.0f} ms")


async def fd_scenario(serve: Serve, conns: int, nofile: int) -> None:
    """Half-sent requests beyond the open-files limit, then /healthz."""
    writers = []
    refused = 0
    for _ in range(conns):
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, serve.port), 2)
            writer.write(HEAD + b"X-Half: sent")
            writers.append((reader, writer))
        except (OSError, TimeoutError):
            refused += 1
    await asyncio.sleep(1.0)
    fds = open_fds(serve.pid)
    answers = [await healthz(serve.port, 2.0) for _ in range(5)]
    ok = sum(s == 200 for s, _ in answers)
    closed_by_server = 0
    for r, _ in writers:
        try:
            await asyncio.wait_for(r.read(1), 0.01)  # an answer (408) or the end
            closed_by_server += 1
        except TimeoutError:
            pass
        except ConnectionError:
            closed_by_server += 1
    print(
        f"fd (ulimit -n {nofile}): {conns} half-sent requests ({refused} failed to connect); "
        f"server fds {fds}; /healthz {ok}/5 answered 200 within 2 s; "
        f"half-sent closed by the server: {closed_by_server}"
    )
    for _, w in writers:
        w.close()
    await asyncio.sleep(1.0)
    answers = [await healthz(serve.port, 2.0) for _ in range(3)]
    print(f"  after the half-sent went away: /healthz {sum(s == 200 for s, _ in answers)}/3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    all_scenarios = ["trickle-head", "trickle-body", "idle", "fd", "big-headers"]
    parser.add_argument("scenarios", nargs="*", default=all_scenarios)
    parser.add_argument("--conns", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--nofile", type=int, default=256)
    parser.add_argument("--fd-conns", type=int, default=300)
    parser.add_argument(
        "--attach",
        metavar="PORT:PID",
        help="use a server already running there instead of starting hookinbox serve",
    )
    parser.add_argument(
        "--server", default="", help='extra [server] TOML lines, e.g. "max_connections = 100"'
    )
    args = parser.parse_args()
    server_toml = "[server]\n" + args.server.replace(";", "\n") + "\n" if args.server else ""
    for scenario in args.scenarios:
        with tempfile.TemporaryDirectory(prefix="hookinbox-slow-") as tmp:
            nofile = args.nofile if scenario == "fd" else None
            serve = Serve(Path(tmp), nofile, server_toml)
            if args.attach:
                port, pid = args.attach.split(":")
                serve.port = int(port)
                serve.proc = Attached(int(pid))  # type: ignore[assignment]
            else:
                serve.start()
            try:
                asyncio.run(run_one(serve, scenario, args))
            finally:
                serve.stop()


async def run_one(serve: Serve, scenario: str, args: argparse.Namespace) -> None:
    port, seconds = serve.port, args.seconds
    if scenario == "trickle-head":
        line = b"X-Trickle: " + b"a" * 200 + b"\r\n"
        await slow_scenario(
            serve,
            scenario,
            lambda: slow_connection(port, b"", HEAD + line, seconds, 1.0),
            args.conns,
            seconds,
        )
    elif scenario == "trickle-body":
        head = HEAD + b"Content-Length: 4096\r\n\r\n"
        await slow_scenario(
            serve,
            scenario,
            lambda: slow_connection(port, head, b"{" + b" " * 100, seconds, 1.0),
            args.conns,
            seconds,
        )
    elif scenario == "idle":
        idle = lambda: slow_connection(port, b"", b"", seconds, 1.0)  # noqa: E731
        await slow_scenario(serve, scenario, idle, args.conns, seconds)
    elif scenario == "fd":
        await fd_scenario(serve, args.fd_conns, args.nofile)
    elif scenario == "big-headers":
        await big_headers(serve, many=False)
        await big_headers(serve, many=True)
    else:
        raise SystemExit(f"unknown scenario {scenario}")


if __name__ == "__main__":
    main()
