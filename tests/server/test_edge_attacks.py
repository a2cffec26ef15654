"""What an unauthenticated client can do to ``hookinbox serve`` over raw sockets, and the
bound that stops it: pipelining without reading, ``Upgrade`` desync, unbounded and
quadratic trailers, ``Expect`` with an oversized body, slow bodies on the webhook port
against the operator port, empty lines and bare LFs before and in a head, targets and
Host headers the request line and RFC 9112 do not allow, a half-close behind pipelined
requests, and a port already in use.

One real server process (small limits, both listeners) serves the attacks of a module;
each attack cleans up its own sockets and every wait is bounded.
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hookinbox.server import PIPELINE_DEPTH
from tests.server.support import write_config
from tests.support.processes import REPO, HookinboxProcess, free_port, hookinbox_env
from tests.support.signing import SECRET, SECRET_ENV, delivery

HOST = "127.0.0.1"
CAP = 8
SERVER = f"""\
header_timeout_seconds = 2
body_timeout_seconds = 3
keep_alive_timeout_seconds = 2
max_header_bytes = 65536
write_timeout_seconds = 1
max_connections = {CAP}
"""
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
HEALTHZ_CLOSE = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


@dataclass
class Served:
    port: int
    admin_port: int
    process: HookinboxProcess


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("edge")
    port, admin_port = free_port(), free_port()
    config = write_config(
        tmp / "c.toml",
        f"sqlite:///{tmp}/h.db",
        port,
        server=SERVER + f"admin_port = {admin_port}\n",
    )
    process = HookinboxProcess(
        ["serve", "--config", str(config), "--no-workers"],
        hookinbox_env({SECRET_ENV: SECRET, "HOOKINBOX_API_TOKENS": "ci:read:" + "t" * 40}),
        tmp / "serve.log",
    ).start()
    try:
        process.wait_healthy(f"http://{HOST}:{port}", timeout=60)
        yield Served(port, admin_port, process)
    finally:
        process.stop()


def connect(port: int, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(5)
    sock.connect((HOST, port))
    return sock


def read_all(sock: socket.socket, timeout: float = 5.0) -> tuple[bytes, bool]:
    """What the server sends until it closes (True) or ``timeout`` passes (False)."""
    sock.settimeout(0.2)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            return b"".join(chunks), True
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
    return b"".join(chunks), False


def status(port: int, request: bytes = HEALTHZ_CLOSE) -> int | None:
    with connect(port) as sock:
        sock.sendall(request)
        answer, _ = read_all(sock, 5)
    return int(answer.split()[1]) if answer.startswith(b"HTTP/1.1 ") else None


def cut_total(admin_port: int, reason: str) -> float:
    with connect(admin_port) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        text, _ = read_all(sock, 5)
    line = b'hookinbox_connections_cut_total{reason="%s"} ' % reason.encode()
    for row in text.splitlines():
        if row.startswith(line):
            return float(row[len(line) :])
    return 0.0


def test_pipelined_requests_beyond_a_few_are_not_read_the_connection_is_closed(
    served: Served,
) -> None:
    """Fifty requests in one write: the first PIPELINE_DEPTH are answered, then the
    connection is closed (the client sends the rest again on a new one), instead of all
    fifty parsed ahead and queued."""
    with connect(served.port) as sock:
        sock.sendall(HEALTHZ * 50)
        answers, closed = read_all(sock, 5)
    assert answers.count(b"HTTP/1.1 200 ") == PIPELINE_DEPTH
    assert closed


@pytest.mark.parametrize(
    "request_head",
    [HEALTHZ_CLOSE, b"GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n", HEALTHZ + HEALTHZ_CLOSE],
    ids=["connection-close", "http-1.0", "pipelined-then-close"],
)
def test_a_request_without_keep_alive_is_answered_and_closed_at_once(
    served: Served, request_head: bytes
) -> None:
    """A bodiless request that asks for the connection to close (``Connection: close``,
    or HTTP/1.0) is answered and closed then, not held for the keep-alive deadline."""
    with connect(served.port) as sock:
        sock.sendall(request_head)
        answers, closed = read_all(sock, 1.0)  # the keep-alive deadline is 2 s
    assert answers.count(b" 200 OK") == request_head.count(b"GET ")
    assert closed


def test_an_answer_the_client_does_not_read_is_cut_at_the_write_deadline(
    served: Served,
) -> None:
    """Pipelined OpenAPI documents (tens of KB each) to a client with a 1 KiB receive
    buffer that reads nothing: once the socket buffers are full the connection is cut
    after write_timeout_seconds (1 s) and counted, instead of waiting on a drain for
    ever while holding its slot."""
    before = cut_total(served.admin_port, "write_stalled")
    request = b"GET /api/v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"
    stalled = [connect(served.admin_port, rcvbuf=1024) for _ in range(3)]
    try:
        for sock in stalled:
            sock.sendall(request * PIPELINE_DEPTH)
        deadline = time.monotonic() + 6
        cut = 0.0
        while time.monotonic() < deadline and cut < before + len(stalled):
            time.sleep(0.2)
            cut = cut_total(served.admin_port, "write_stalled")
        operator = status(served.admin_port)
    finally:
        for sock in stalled:
            sock.close()
    assert cut == before + len(stalled)
    assert operator == 200


def test_pipelining_clients_that_never_read_never_hold_the_slots_of_either_port(
    served: Served,
) -> None:
    """A full cap of connections, each sending thousands of pipelined requests and
    reading nothing: new connections on both ports are still served."""
    attackers = [connect(served.port, rcvbuf=1024) for _ in range(CAP)]
    try:
        for sock in attackers:
            sock.settimeout(0.5)
            try:
                for _ in range(14):
                    sock.sendall(HEALTHZ * 1760)  # ~60 KB a write, as a flood would
            except OSError:
                pass
        operator = status(served.admin_port)
        deadline = time.monotonic() + 4
        webhook = None
        while time.monotonic() < deadline and webhook != 200:
            webhook = status(served.port)
            time.sleep(0.1)
    finally:
        for sock in attackers:
            sock.close()
    assert operator == 200
    assert webhook == 200


def test_an_upgrade_request_is_refused_and_its_body_never_runs_as_a_request(
    served: Served,
) -> None:
    smuggled = b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"
    head = (
        b"POST /webhooks/test HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: foo\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(smuggled)
    )
    with connect(served.port) as sock:
        sock.sendall(head + smuggled)
        answer, closed = read_all(sock, 5)
    assert answer.count(b"HTTP/1.1 ") == 1
    assert answer.startswith(b"HTTP/1.1 400 ") and answer.endswith(b"upgrade_refused")
    assert closed

    body, headers = delivery("evt_with_upgrade")
    signed = b"POST /webhooks/test HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n"
    signed += b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items())
    signed += b"Content-Length: %d\r\n\r\n" % len(body) + body
    with connect(served.port) as sock:
        sock.sendall(signed)
        answer, _ = read_all(sock, 5)
    assert answer.startswith(b"HTTP/1.1 400 ") and b"upgrade_refused" in answer
    assert "invalid_signature" not in served.process.output()


@pytest.mark.parametrize(
    ("after_head", "code"),
    [
        (b"2\r\n{}\r\n0\r\nX-T: ", b"framing_too_large"),  # one endless trailer value
        (b"2\r\n{}\r\n0\r\n", b"framing_too_large"),  # endless trailer fields
        (b"1;ext=", b"bad_chunk_framing"),  # an endless chunk extension
    ],
)
def test_trailers_and_chunk_framing_count_against_a_bound_read_in_linear_time(
    served: Served, after_head: bytes, code: bytes
) -> None:
    """20 MB after a chunked head, in 64 KiB writes: refused by the bound after the first
    few KiB (each byte scanned once), instead of read whole until the body deadline with
    a quadratic join blocking the loop."""
    filler = b"X-Trailer-Field: " + b"a" * 40 + b"\r\n" if after_head.endswith(b"0\r\n") else b"a"
    flood = after_head + filler * ((20 << 20) // len(filler))
    head = (
        b"POST /webhooks/test HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    with connect(served.port) as sock:
        sock.sendall(head)
        sent = 0
        try:
            while sent < len(flood):
                sent += sock.send(flood[sent : sent + 65536])
        except OSError:
            pass
        answer, _ = read_all(sock, 5)
    assert answer.startswith(b"HTTP/1.1 431 ") or answer.startswith(b"HTTP/1.1 400 "), answer
    assert answer.endswith(code)
    assert sent < len(flood) // 2
    assert status(served.port) == 200


def test_a_refusal_with_the_body_unread_closes_the_connection_never_reuses_it(
    served: Served,
) -> None:
    head = (
        b"POST /webhooks/test HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Expect: 100-continue\r\nContent-Length: 2000000\r\n\r\n"
    )
    with connect(served.port) as sock:
        sock.sendall(head)
        sock.settimeout(5)
        first = sock.recv(65536)
        with contextlib.suppress(OSError):
            sock.sendall(HEALTHZ)  # the next request, where the body would have been
        rest, closed = read_all(sock, 3)
    assert first.startswith(b"HTTP/1.1 413 ")
    assert b"HTTP/1.1 " not in rest  # the next request was not swallowed into a reuse
    assert closed


def test_slow_bodies_filling_the_webhook_port_never_lock_out_the_operator_port(
    served: Served,
) -> None:
    head = (
        b"POST /webhooks/test HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n{"
    )
    slow = [connect(served.port) for _ in range(CAP)]
    try:
        for sock in slow:
            sock.sendall(head)
        time.sleep(0.3)
        operator = [status(served.admin_port) for _ in range(3)]
    finally:
        for sock in slow:
            sock.close()
    assert operator == [200, 200, 200]


def answers(port: int, data: bytes, *, half_close: bool = False) -> list[int]:
    """The statuses of what ``data`` sent on one connection got before the close."""
    with connect(port) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        text, closed = read_all(sock, 5)
    assert closed, text
    return [int(code) for code in re.findall(rb"HTTP/1\.1 (\d{3}) ", text)]


def test_empty_lines_before_a_request_line_are_ignored_up_to_a_bound(served: Served) -> None:
    # A client that ends a body with an extra CRLF: the next request is read as usual.
    assert answers(served.port, b"\r\n" + HEALTHZ + b"\r\n" + HEALTHZ_CLOSE) == [200, 200]
    # A stream of them is not read on: 400, closed, after a few bytes.
    with connect(served.port) as sock:
        sock.sendall(b"\r\n" * 8)
        answer, closed = read_all(sock, 5)
    assert answer.startswith(b"HTTP/1.1 400 ") and answer.endswith(b"malformed_request")
    assert closed


def test_connections_sending_empty_lines_cannot_hold_the_webhook_port(served: Served) -> None:
    # Every slot taken by a client sending an empty head faster than the sweep's tick: its
    # connection's phase must still age (and be given up), or no one else gets in.
    attackers = [connect(served.port) for _ in range(CAP)]
    try:
        for _ in range(5):
            for sock in attackers:
                with contextlib.suppress(OSError):
                    sock.sendall(b"\r\n\r\n")
            time.sleep(0.1)  # the attack's own pace, below the server's 0.25 s tick
        assert status(served.port) == 200
        ends = [read_all(sock, 5) for sock in attackers]
    finally:
        for sock in attackers:
            sock.close()
    assert all(closed for _, closed in ends)


def test_a_head_ended_by_bare_lf_is_refused_at_once_not_at_its_deadline(served: Served) -> None:
    started = time.monotonic()
    with connect(served.port) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\nHost: x\n\n")
        answer, closed = read_all(sock, 5)
    assert answer.startswith(b"HTTP/1.1 400 ") and answer.endswith(b"malformed_request")
    assert closed and time.monotonic() - started < 1.5  # the header deadline is 2 s


def test_an_absolute_form_target_without_a_path_is_the_root(served: Served) -> None:
    absolute = b"GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n"
    with connect(served.port) as sock:
        sock.sendall(absolute.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        alone, _ = read_all(sock, 5)
    assert alone.startswith(b"HTTP/1.1 404 ")  # nothing at the webhook port's root
    # Between two requests on one connection: each answered, in order.
    assert answers(served.port, HEALTHZ + absolute + HEALTHZ_CLOSE) == [200, 404, 200]


@pytest.mark.parametrize(
    "head",
    [
        b"GET /healthz HTTP/1.1\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
        b"GET /healthz HTTP/1.0\r\nHost: x\r\nHost: x\r\n\r\n",
    ],
    ids=["http11_without_host", "two_hosts", "http10_two_hosts"],
)
def test_a_request_without_one_host_header_is_refused(served: Served, head: bytes) -> None:
    with connect(served.port) as sock:
        sock.sendall(head)
        answer, closed = read_all(sock, 5)
    assert answer.startswith(b"HTTP/1.1 400 ") and answer.endswith(b"bad_host") and closed


def test_an_http10_request_without_a_host_is_answered(served: Served) -> None:
    assert answers(served.port, b"GET /healthz HTTP/1.0\r\n\r\n") == [200]


def test_requests_sent_whole_before_a_half_close_are_all_answered(served: Served) -> None:
    # The client sends three requests and shuts its side: all three were whole, so all
    # three are answered before the close; a fourth cut short is not.
    assert answers(served.port, HEALTHZ * 3, half_close=True) == [200, 200, 200]
    assert answers(served.port, HEALTHZ * 2 + b"GET /heal", half_close=True) == [200, 200]


def serve_once(config: Path) -> subprocess.CompletedProcess[str]:
    """``hookinbox serve`` run to its end (it is expected to refuse to start)."""
    return subprocess.run(
        [sys.executable, "-m", "hookinbox.cli", "serve", "--config", str(config)],
        env=hookinbox_env({SECRET_ENV: SECRET}),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_port_in_use_is_one_line_naming_it_and_its_own_exit_code(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = write_config(tmp_path / "c.toml", f"sqlite:///{tmp_path}/h.db", port)
        done = serve_once(config)
    assert done.returncode == 6
    assert done.stderr == (
        f"hookinbox: port_in_use: server.port: {HOST}:{port} is already in use by another process\n"
    )
    assert "inbox_started" not in done.stdout  # nothing started before the bind


def test_the_operator_port_in_use_is_named_too(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        admin_port = taken.getsockname()[1]
        config = write_config(
            tmp_path / "c.toml",
            f"sqlite:///{tmp_path}/h.db",
            free_port(),
            server=f"admin_port = {admin_port}\n",
        )
        done = serve_once(config)
    assert done.returncode == 6
    assert done.stderr.startswith("hookinbox: port_in_use: server.admin_port: "), done.stderr
