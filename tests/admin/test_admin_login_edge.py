"""``POST /admin/login`` tried as an attacker would, against a real ``hookinbox serve``:
the body is bounded and refused before it is parsed, a refusal is never a 500, the
throttle counts attempts still in flight and per real client address, failures from many
addresses never lock out the right token, a name with dots stays logged in, and a short
admin or API token stops the start-up."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from tests.admin.support import TOKEN, serving
from tests.server.support import status_of
from tests.support.processes import REPO, free_port, hookinbox_env

HOST = "127.0.0.1"
LOGIN = "/admin/login"
FORM = "application/x-www-form-urlencoded"


def head(length: int | None, content_type: str = FORM, extra: str = "") -> bytes:
    framing = "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
    return (
        f"POST {LOGIN} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: {content_type}\r\n"
        f"{framing}\r\n{extra}\r\n"
    ).encode()


async def read_answer(reader: asyncio.StreamReader, timeout: float = 15.0) -> bytes:
    """One answer (its head and its Content-Length of body), or what came before the
    server closed or ``timeout`` passed."""
    data = b""
    with contextlib.suppress(TimeoutError, ConnectionError, asyncio.IncompleteReadError):
        async with asyncio.timeout(timeout):
            data = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in data.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            data += await reader.readexactly(length)
    return data


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Answer:
    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.status_code = status_of(raw)
        self.text = raw.decode("utf-8", "replace")


async def login(
    port: int, token: str, *, source: str = HOST, name: str = "tester", **headers: str
) -> Answer:
    """One login from the local address ``source`` (any of 127.0.0.0/8 is this host)."""
    body = urlencode({"token": token, "name": name}).encode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    reader, writer = await asyncio.open_connection(HOST, port, local_addr=(source, 0))
    try:
        writer.write(head(len(body), extra=extra + "Connection: close\r\n") + body)
        return Answer(await read_answer(reader))
    finally:
        writer.close()


@pytest.mark.slow
async def test_the_login_body_is_bounded_urlencoded_utf8_and_never_a_500(
    tmp_path: Path,
) -> None:
    multipart = "multipart/form-data; boundary=b; charset=utf-7"
    part = b'--b\r\nContent-Disposition: form-data; name="token"\r\n\r\n+2AA-\r\n--b--\r\n'
    with serving(tmp_path) as (port, process):
        # A body announced too large is refused before a byte of it is sent.
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(head(600 * 1_048_576))
        too_large = await read_answer(reader, timeout=10)
        writer.close()
        # A chunked body is cut at the bound, and the rest of 32 MiB finds the door shut.
        before = rss_kib(process.pid)
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(head(None) + b"2000\r\n" + b"a=" + b"x" * 8190 + b"\r\n")
        chunked = await read_answer(reader)
        field = b"a=" + b"x" * 1_048_576 + b"&"
        with contextlib.suppress(ConnectionError, TimeoutError):
            async with asyncio.timeout(10):
                for _ in range(32):
                    writer.write(f"{len(field):x}\r\n".encode() + field + b"\r\n")
                    await writer.drain()
        writer.close()
        grown = rss_kib(process.pid) - before
        # Multipart, another charset, and what urlencoding never makes.
        # Each from an address of its own: a refused form counts as a failed attempt.
        statuses = {}
        for n, (label, content_type, body) in enumerate(
            [
                ("utf-7 multipart", multipart, part),
                ("big multipart", "multipart/form-data; boundary=b", part * 100),
                ("utf-7 form", f"{FORM}; charset=utf-7", b"token=%2B2AA-"),
                ("not utf-8", FORM, b"token=%ED%A0%80"),
                ("raw bytes", FORM, b"token=\xff\xfe"),
                ("nine fields", FORM, b"&".join([b"a=1"] * 9)),
                ("token twice", FORM, b"token=a&token=b"),
            ]
        ):
            transport = httpx.AsyncHTTPTransport(local_address=f"127.0.3.{n + 1}")
            async with httpx.AsyncClient(transport=transport, timeout=10) as client:
                answer = await client.post(
                    f"http://{HOST}:{port}{LOGIN}",
                    content=body,
                    headers={"content-type": content_type},
                )
            statuses[label] = (answer.status_code, answer.headers.get("connection"))
            assert "<code>" in answer.text, label
    assert status_of(too_large) == 413, too_large[:200]
    assert b"form_too_large" in too_large
    assert status_of(chunked) == 413, chunked[:200]
    assert grown < 16 * 1024, f"RSS grew {grown} KiB"
    assert statuses == {
        "utf-7 multipart": (415, "close"),
        "big multipart": (415, "close"),
        "utf-7 form": (415, "close"),
        "not utf-8": (400, "close"),
        "raw bytes": (400, "close"),
        "nine fields": (400, "close"),
        "token twice": (400, "close"),
    }


@pytest.mark.slow
async def test_concurrent_wrong_logins_take_their_slot_before_the_token_is_compared(
    tmp_path: Path,
) -> None:
    """Thirty attempts whose heads all arrive before any body: five are compared."""
    body = b"token=wrong-guess-0123456789-0123456789"
    with serving(tmp_path) as (port, _):
        connections = [await asyncio.open_connection(HOST, port) for _ in range(30)]
        for _, writer in connections:
            writer.write(head(len(body)))
            await writer.drain()
        # The bodies come once the refused ones have their answer (or after 3 s, for a
        # server that refuses none before it has read a body).
        reading = [asyncio.create_task(read_answer(reader)) for reader, _ in connections]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 3
        while sum(task.done() for task in reading) < 25 and loop.time() < deadline:
            await asyncio.wait(
                reading, timeout=deadline - loop.time(), return_when="FIRST_COMPLETED"
            )
        for _, writer in connections:
            with contextlib.suppress(ConnectionError):
                writer.write(body)
        answers = await asyncio.gather(*reading)
        for _, writer in connections:
            writer.close()
    statuses = sorted(status_of(answer) or 0 for answer in answers)
    assert statuses == [401] * 5 + [429] * 25


@pytest.mark.slow
async def test_forwarded_for_counts_only_from_a_configured_proxy(tmp_path: Path) -> None:
    """127.0.0.2 is the proxy: the client is the hop it appended."""
    with serving(tmp_path, 'forwarded_allow_ips = ["127.0.0.2"]\n') as (port, _):
        proxied = [
            (
                await login(
                    port,
                    "wrong",
                    source="127.0.0.2",
                    **{"x-forwarded-for": f"203.0.113.{n}, 198.51.100.7"},
                )
            ).status_code
            for n in range(6)
        ]
        neighbour = await login(
            port, TOKEN, source="127.0.0.2", **{"x-forwarded-for": "198.51.100.8"}
        )
    # The proxy's rightmost hop is the client; what the client wrote left of it is not.
    assert proxied == [401] * 5 + [429]
    assert neighbour.status_code == 303


@pytest.mark.slow
async def test_failures_from_many_addresses_slow_guessing_but_never_stop_the_right_token(
    tmp_path: Path,
) -> None:
    with serving(tmp_path) as (port, _):
        # No proxy is configured: whatever X-Forwarded-For says, these are 127.0.0.1's.
        rotating = [
            (await login(port, "wrong", **{"x-forwarded-for": f"198.51.100.{n}"})).status_code
            for n in range(8)
        ]
        attempts = [login(port, "wrong", source=f"127.0.1.{n}") for n in range(60)]
        spread = [answer.status_code for answer in await asyncio.gather(*attempts)]
        again = await login(port, "wrong", source="127.0.1.3")
        fresh_wrong = await login(port, "wrong", source="127.0.2.1")
        fresh_again = await login(port, "wrong", source="127.0.2.1")
        # The operator, whose name is an e-mail address, logs in and stays logged in.
        transport = httpx.AsyncHTTPTransport(local_address="127.0.2.2")
        async with httpx.AsyncClient(
            transport=transport, base_url=f"http://{HOST}:{port}", timeout=10
        ) as client:
            operator = await client.post(
                LOGIN, data={"token": TOKEN, "name": "ana.maria@ops.example.com"}
            )
            page = await client.get("/admin/", follow_redirects=False)
    assert rotating == [401] * 5 + [429] * 3
    assert spread == [401] * 60  # one each: no address is throttled by the others
    # Past 50 failures a minute, every address gets one attempt a minute.
    assert again.status_code == 429
    assert (fresh_wrong.status_code, fresh_again.status_code) == (401, 429)
    assert operator.status_code == 303
    assert page.status_code == 200 and "ana.maria@ops.example.com" in page.text


@pytest.mark.parametrize(
    ("variable", "value"),
    [("HOOKINBOX_ADMIN_TOKEN", "x" * 31), ("HOOKINBOX_API_TOKENS", "ci:read:" + "x" * 31)],
)
def test_a_token_shorter_than_32_characters_stops_serve_with_one_line(
    tmp_path: Path, variable: str, value: str
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f'database = "sqlite:///{tmp_path}/h.db"\n[server]\nport = {free_port()}\n')
    done = subprocess.run(
        [sys.executable, "-m", "hookinbox.cli", "serve", "--config", str(config)],
        env=hookinbox_env({variable: value}),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and variable in lines[0] and "32" in lines[0], done.stderr
    assert value not in done.stderr
