"""The edge's attack suite: each attack of docs/server.md's threat model played against a
real ``hookinbox serve`` (SQLite, both listeners, default limits), while /healthz is asked
on a fresh connection on each port every 50 ms; its RSS sampled meanwhile.

    PYTHONPATH=scripts .venv/bin/python -m chaos.edge [--seconds 10]

Per attack: the p99 and slowest /healthz on each port, refusals, and the largest RSS
against the idle one. Fails (exit 1) when a p99 passes 100 ms, RSS passes 2x idle, or
the operator port refused a connection. Traffic only to 127.0.0.1; everything started
here is stopped here, by PID.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Stop = Any  # a multiprocessing Event

HOST = "127.0.0.1"
SECRET_ENV = "CHAOS_EDGE_SECRET"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
POST = b"POST /webhooks/test HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
REPO = Path(__file__).resolve().parents[2]
#: Repeated attacks send a batch of 20 every PACE seconds (100 a second): the bound of each
#: is what is measured, not how many requests a second one core can refuse (a flood of
#: volume is the proxy's to rate-limit; docs/server.md).
PACE = 0.2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def probe(port: int) -> float | None:
    """Seconds for one /healthz on a fresh connection; None if not answered 200."""
    started = time.monotonic()
    try:
        with socket.create_connection((HOST, port), timeout=2) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = sock.recv(64)
    except OSError:
        return None
    return time.monotonic() - started if answer.startswith(b"HTTP/1.1 200") else None


def sockets(port: int, count: int, rcvbuf: int | None = None) -> list[socket.socket]:
    made = []
    for _ in range(count):
        sock = socket.socket()
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.settimeout(0.5)
        with contextlib.suppress(OSError):
            sock.connect((HOST, port))
            made.append(sock)
    return made


def send_quietly(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(data)


def pipelining_no_read(port: int, stop: Stop) -> None:
    """60 connections, each 14 x 60 KB of pipelined /healthz, reading nothing."""
    held = sockets(port, 60, rcvbuf=1024)
    for _ in range(14):
        for sock in held:
            send_quietly(sock, HEALTHZ * 1760)
    stop.wait()
    for sock in held:
        sock.close()


def upgrade_desync(port: int, stop: Stop) -> None:
    smuggled = b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"
    request = POST + b"Connection: Upgrade\r\nUpgrade: foo\r\nContent-Length: %d\r\n\r\n" % len(
        smuggled
    )
    while not stop.wait(PACE):
        for sock in sockets(port, 20):
            send_quietly(sock, request + smuggled)
            sock.close()


def long_trailer(port: int, stop: Stop) -> None:
    """Chunked bodies whose one trailer value would be 100 MB, in 64 KiB writes."""
    flood = b"a" * 65536
    while not stop.is_set():
        for sock in sockets(port, 4):
            send_quietly(sock, POST + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-T: ")
            for _ in range(100 * 16):
                if stop.is_set():
                    break
                try:
                    sock.sendall(flood)
                except OSError:
                    break
            sock.close()


def many_trailers(port: int, stop: Stop) -> None:
    """300 MB of 1 KB trailer fields after a /healthz with a chunked body."""
    field = b"X-T: " + b"a" * 1019 + b"\r\n"
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
    while not stop.is_set():
        for sock in sockets(port, 4):
            send_quietly(sock, head)
            for _ in range(300 * 16):
                if stop.is_set():
                    break
                try:
                    sock.sendall(field * 64)
                except OSError:
                    break
            sock.close()


def expect_oversized(port: int, stop: Stop) -> None:
    request = POST + b"Expect: 100-continue\r\nContent-Length: 2000000\r\n\r\n"
    while not stop.wait(PACE):
        for sock in sockets(port, 20):
            send_quietly(sock, request)
            send_quietly(sock, HEALTHZ)
            sock.close()


def slow_bodies(port: int, stop: Stop) -> None:
    """More slow bodies than the webhook port's cap (512), a byte every second."""
    held = sockets(port, 600)
    for sock in held:
        send_quietly(sock, POST + b"Content-Length: 100000\r\n\r\n{")
    while not stop.wait(1.0):
        for sock in held:
            send_quietly(sock, b" ")
    for sock in held:
        sock.close()


ATTACKS: dict[str, Callable[[int, Stop], None]] = {
    "pipelining, never reading": pipelining_no_read,
    "Upgrade with a smuggled body": upgrade_desync,
    "one 100 MB trailer value": long_trailer,
    "300 MB of 1 KB trailers": many_trailers,
    "Expect with 2 MB Content-Length": expect_oversized,
    "600 slow bodies (cap 512)": slow_bodies,
}


def p50(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else float("nan")


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="chaos-edge-") as tmp:
        port, admin_port = free_port(), free_port()
        config = Path(tmp) / "c.toml"
        config.write_text(
            f'database = "sqlite:///{tmp}/h.db"\n[server]\nhost = "{HOST}"\nport = {port}\n'
            f"admin_port = {admin_port}\n[sources.test]\n"
            f'scheme = "standard-webhooks"\nsecret_env = "{SECRET_ENV}"\n'
        )
        env = {**os.environ, SECRET_ENV: SECRET, "PYTHONPATH": str(REPO)}
        log = (Path(tmp) / "serve.log").open("wb")
        server = subprocess.Popen(
            [sys.executable, "-m", "hookinbox.cli", "serve", "--config", str(config)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        failed = False
        try:
            deadline = time.monotonic() + 60
            while probe(port) is None:
                if time.monotonic() > deadline or server.poll() is not None:
                    print("serve did not start", file=sys.stderr)
                    return 1
                time.sleep(0.2)
            time.sleep(1.0)
            idle = rss_mb(server.pid)
            print(f"idle RSS {idle:.0f} MB; each attack {args.seconds:.0f} s")
            print(
                f"{'attack':34} {'webhook p50/p99 ms':>19} {'operator p50/p99 ms':>20}"
                f" {'probes':>7} {'refused':>8} {'RSS MB':>7}"
            )
            for name, attack in ATTACKS.items():
                # A process of its own: the probes here must not wait on its sends.
                stop = multiprocessing.get_context("fork").Event()
                thread = multiprocessing.get_context("fork").Process(
                    target=attack, args=(port, stop), daemon=True
                )
                thread.start()
                times: dict[int, list[float]] = {port: [], admin_port: []}
                refused = {port: 0, admin_port: 0}
                peak = 0.0
                ends = time.monotonic() + args.seconds
                while time.monotonic() < ends:
                    for which in (port, admin_port):
                        took = probe(which)
                        if took is None:
                            refused[which] += 1
                        else:
                            times[which].append(took)
                    peak = max(peak, rss_mb(server.pid))
                    time.sleep(0.05)
                stop.set()
                thread.join(30)
                if thread.is_alive():
                    thread.kill()
                web, op = times[port], times[admin_port]
                print(
                    f"{name:34} {p50(web) * 1000:9.1f}/{p99(web) * 1000:<9.1f}"
                    f" {p50(op) * 1000:10.1f}/{p99(op) * 1000:<9.1f} {len(op):>7}"
                    f" {refused[port]:>3}/{refused[admin_port]:<4} {peak:7.0f}"
                )
                if p99(op) > 0.1 or p99(web) > 0.1 or peak > 2 * idle or refused[admin_port]:
                    failed = True
                time.sleep(1.5)  # the cuts of this attack end before the next
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(10)
            log.close()
    print("edge: FAILED" if failed else "edge: every bound held")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
