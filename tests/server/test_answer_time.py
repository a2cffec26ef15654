"""``hookinbox_answer_seconds`` is the server's time to answer a delivery, counted from
the moment the request was whole: a provider that uploads its body slowly does not make
``hookinbox serve`` look slow (the operator reads this histogram for the p99)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx

from tests.server.support import serving_sqlite
from tests.support.signing import delivery

#: How long the client takes between its first body bytes and the rest.
UPLOAD_PAUSE_SECONDS = 0.6
#: A body deadline well past the pause: the upload is slow, not stalled.
PATIENT_BODY = "body_timeout_seconds = 10\n"


def _answer_seconds(metrics: str) -> tuple[float, float]:
    """(count, sum) of the test source's answer-time histogram."""
    found = dict(
        re.findall(r'^hookinbox_answer_seconds_(count|sum)\{source="test"\} (\S+)$', metrics, re.M)
    )
    return float(found["count"]), float(found["sum"])


async def _post_slowly(port: int, body: bytes, headers: dict[str, str]) -> bytes:
    """The head and ten body bytes, a pause, then the rest; the answer until the server
    closes (``Connection: close``)."""
    head = (
        f"POST /webhooks/test HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n"
        + "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        + "\r\n"
    ).encode("latin-1")
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + body[:10])
        await writer.drain()
        # The client's slow upload is the scenario: a pause, not a wait for a result.
        await asyncio.sleep(UPLOAD_PAUSE_SECONDS)
        writer.write(body[10:])
        async with asyncio.timeout(10):
            return await reader.read()
    finally:
        writer.close()


async def test_a_slow_upload_is_not_counted_as_the_servers_answer_time(tmp_path: Path) -> None:
    server, port = serving_sqlite(tmp_path, PATIENT_BODY)
    base = f"http://127.0.0.1:{port}"
    try:
        server.wait_healthy(base)
        body, headers = delivery("evt_slow_upload")
        answer = await _post_slowly(port, body, headers)
        async with httpx.AsyncClient(timeout=10) as client:
            metrics = (await client.get(f"{base}/metrics")).text
    finally:
        server.stop()
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    assert b'"accepted"' in answer
    count, seconds = _answer_seconds(metrics)
    assert count == 1
    # The upload took UPLOAD_PAUSE_SECONDS; the answer after it, a SQLite commit.
    assert seconds < UPLOAD_PAUSE_SECONDS / 2, seconds
