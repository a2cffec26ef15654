"""Slow and abusive clients are cut off; everybody else, /healthz included, is answered.

Real sockets against the real app under hookinbox's server set-up (hookinbox.server),
with half-second deadlines. The connection rules do not depend on the store: those tests
run once, on SQLite; the one that checks deliveries are stored meanwhile runs on both.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from hookinbox.server import ConnectionLimits
from tests.server.support import (
    HEAD,
    HEALTHZ,
    HEALTHZ_CLOSE,
    HOST,
    LIMITS,
    SLACK,
    answer_to,
    bounded_inbox,
    half_sent,
    status_of,
    trickle,
)
from tests.support.inbox import make_config
from tests.support.signing import delivery

HEAD_LINE = b"X-Trickle: " + b"a" * 100 + b"\r\n"


async def cuts(client: httpx.AsyncClient, base_url: str, reason: str) -> float:
    """``hookinbox_connections_cut_total{reason}`` in /metrics (a per-process counter)."""
    text = (await client.get(f"{base_url}/metrics")).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "hookinbox_connections_cut_total" and sample.labels == {
                "reason": reason
            }:
                return sample.value
    return 0.0


def raw_delivery(event_id: str, *, close: bool = True, pad: int = 0) -> bytes:
    """A signed delivery as one raw request (``pad`` bytes of extra payload)."""
    body, headers = delivery(event_id, padding="x" * pad)
    lines = [b"POST /webhooks/test HTTP/1.1", b"Host: 127.0.0.1"]
    lines += [f"{name}: {value}".encode() for name, value in headers.items()]
    lines += [b"Content-Length: %d" % len(body)]
    if close:
        lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


async def test_a_request_head_trickling_is_closed_after_the_deadline_while_others_are_answered(
    sqlite_url: str, client: httpx.AsyncClient
) -> None:
    # Long enough that the requests beside the trickles are answered before the deadline
    # on a loaded machine too.
    limits = dataclasses.replace(LIMITS, header_timeout=3.0)
    async with bounded_inbox(make_config(sqlite_url), limits) as server:
        cut_before = await cuts(client, server.base_url, "header_timeout")
        trickles = [
            asyncio.create_task(trickle(server.port, drip=HEAD + HEAD_LINE)) for _ in range(10)
        ]
        await asyncio.sleep(0.2)  # they are all trickling now
        health = await client.get(f"{server.base_url}/healthz")
        body, headers = delivery("evt_beside_the_trickles")
        accepted = await client.post(server.url(), content=body, headers=headers)
        still_trickling = sum(not t.done() for t in trickles)
        outcomes = await asyncio.gather(*trickles)
        cut = await cuts(client, server.base_url, "header_timeout") - cut_before
    assert health.status_code == 200
    assert accepted.status_code == 200 and accepted.json()["status"] == "accepted"
    assert still_trickling == 10  # answered beside them, not after them
    assert cut == 10
    for outcome in outcomes:
        assert outcome.status == 408
        assert limits.header_timeout - 0.05 <= outcome.closed_after < limits.header_timeout + SLACK


async def test_a_body_trickling_is_closed_after_its_deadline_and_nothing_is_stored(
    sqlite_url: str, client: httpx.AsyncClient
) -> None:
    body, headers = delivery("evt_trickled_body")
    head = HEAD + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items())
    head += b"Content-Length: %d\r\n\r\n" % len(body)
    async with bounded_inbox(make_config(sqlite_url)) as server:
        trickles = [
            asyncio.create_task(trickle(server.port, first=head, drip=body)) for _ in range(5)
        ]
        await asyncio.sleep(0.2)
        health = await client.get(f"{server.base_url}/healthz")
        outcomes = await asyncio.gather(*trickles)
        stored = await server.inbox.store.journal.get_delivery("evt_trickled_body")
    assert health.status_code == 200
    for outcome in outcomes:
        assert outcome.status == 408
        assert LIMITS.body_timeout - 0.05 <= outcome.closed_after < LIMITS.body_timeout + SLACK
    assert stored is None


async def test_a_client_still_sending_after_its_408_reads_the_408_not_a_reset(
    sqlite_url: str,
) -> None:
    """A sender that keeps writing its body after the deadline must still see why it was
    cut: the server half-closes and drops what arrives (a lingering close) instead of
    closing at once, which would answer the unread bytes with a reset (the client's
    next write fails with a broken pipe and the 408 is never read)."""

    async def late_writer(port: int) -> bytes:
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(HEAD + b"Content-Length: 1000000\r\n\r\n{")
        await asyncio.sleep(LIMITS.body_timeout + LIMITS.tick + 0.3)
        for _ in range(20):
            writer.write(b"x" * 20_000)
            await asyncio.sleep(0.01)
        try:
            async with asyncio.timeout(5):
                return await reader.read()
        finally:
            writer.close()

    async with bounded_inbox(make_config(sqlite_url)) as server:
        answers = await asyncio.gather(*(late_writer(server.port) for _ in range(5)))
        await asyncio.sleep(1.5)  # the linger ends: nothing is left open
        left_open = server.open_connections()
    assert [status_of(a) for a in answers] == [408] * 5
    assert left_open == 0


async def test_a_connection_that_sends_nothing_is_closed_without_an_answer(
    sqlite_url: str,
) -> None:
    async with bounded_inbox(make_config(sqlite_url)) as server:
        outcome = await trickle(server.port)
    assert outcome.answer == b""
    assert LIMITS.header_timeout - 0.05 <= outcome.closed_after < LIMITS.header_timeout + SLACK


async def test_a_kept_alive_connection_serves_requests_then_is_closed_when_idle(
    sqlite_url: str,
) -> None:
    limits = dataclasses.replace(LIMITS, keep_alive_timeout=3.0)
    async with bounded_inbox(make_config(sqlite_url), limits) as server:
        reader, writer = await asyncio.open_connection(HOST, server.port)
        try:
            answers = []
            for _ in range(3):  # each well within the keep-alive deadline
                writer.write(HEALTHZ)
                answers.append(await asyncio.wait_for(reader.readuntil(b'"ok"}'), 5))
                await asyncio.sleep(0.1)
            idle_since = time.monotonic()
            rest = await asyncio.wait_for(reader.read(), limits.keep_alive_timeout + 5)
            idle_for = time.monotonic() - idle_since
        finally:
            writer.close()
    assert [status_of(a) for a in answers] == [200, 200, 200]
    assert rest == b""  # closed without a word
    assert idle_for < limits.keep_alive_timeout + SLACK


async def test_a_head_trickling_on_a_kept_alive_connection_is_answered_408(
    sqlite_url: str,
) -> None:
    async with bounded_inbox(make_config(sqlite_url)) as server:
        reader, writer = await asyncio.open_connection(HOST, server.port)
        try:
            writer.write(HEALTHZ)
            first = await asyncio.wait_for(reader.readuntil(b'"ok"}'), 5)
            started = time.monotonic()
            for byte in HEAD[:3]:  # a head begun, a byte at a time, never finished
                writer.write(bytes([byte]))
                await asyncio.sleep(0.1)
            rest = await asyncio.wait_for(reader.read(), 5)
            closed_after = time.monotonic() - started
        finally:
            writer.close()
    assert status_of(first) == 200
    assert status_of(rest) == 408
    assert closed_after < LIMITS.header_timeout + SLACK


async def test_pipelined_requests_are_each_answered(sqlite_url: str) -> None:
    async with bounded_inbox(make_config(sqlite_url)) as server:
        answer = await answer_to(server.port, HEALTHZ * 3)
    assert answer.count(b"HTTP/1.1 200 OK") == 3


async def test_a_head_larger_than_the_bound_is_answered_431_without_being_read_whole(
    sqlite_url: str,
) -> None:
    huge = HEAD + b"X-Filler: " + b"a" * (16 << 20) + b"\r\n\r\n"

    def send_until_refused(port: int) -> tuple[int, bytes]:
        """Bytes the server let in before it hung up, and what it answered."""
        with socket.create_connection((HOST, port), timeout=10) as sock:
            sent = 0
            try:
                while sent < len(huge):
                    sent += sock.send(huge[sent : sent + 65536])
            except OSError:
                pass
            try:
                return sent, sock.recv(200)
            except OSError:
                return sent, b""

    async with bounded_inbox(make_config(sqlite_url)) as server:
        sent, answer = await asyncio.to_thread(send_until_refused, server.port)
        health = await answer_to(server.port, HEALTHZ_CLOSE)
    # Refused after its first bytes: the rest of the 16 MB was never accepted (what got
    # in sits in the kernel's socket buffers, a few MB at most on loopback).
    assert sent < len(huge) // 2
    assert status_of(answer) == 431
    assert status_of(health) == 200


async def test_a_head_within_the_bound_and_a_large_body_in_one_write_are_accepted(
    sqlite_url: str,
) -> None:
    # The head is ~600 bytes under a 4 KiB bound; the body, read in the same chunks as
    # the head, is 100 KB: only the head counts.
    request = raw_delivery("evt_large_body", pad=100_000)
    filler = b"X-Filler: " + b"a" * 3000 + b"\r\n"
    padded = raw_delivery("evt_large_head").replace(b"Host: 127.0.0.1\r\n", b"Host: x\r\n" + filler)
    async with bounded_inbox(make_config(sqlite_url)) as server:
        large_body = await answer_to(server.port, request)
        large_head = await answer_to(server.port, padded)
    assert status_of(large_body) == 200 and b'"accepted"' in large_body
    assert status_of(large_head) == 200 and b'"accepted"' in large_head


async def test_at_the_connection_cap_new_connections_replace_the_oldest_half_sent_ones(
    sqlite_url: str,
) -> None:
    # Long head deadlines: only the cap closes anything here. A half-sent head may be
    # replaced once it is older than a tick (0.5 s), so that a burst does not evict itself.
    slow = ConnectionLimits(
        header_timeout=30, body_timeout=30, keep_alive_timeout=2, max_connections=20
    )
    async with bounded_inbox(make_config(sqlite_url), slow) as server:
        held = [await half_sent(server.port) for _ in range(30)]
        most = server.open_connections()
        burst = await asyncio.gather(*(asyncio.wait_for(r.read(), 5) for r, _ in held[20:]))
        await asyncio.sleep(slow.tick + 0.1)
        health = [await answer_to(server.port, HEALTHZ_CLOSE) for _ in range(3)]
        most = max(most, server.open_connections())
        # The oldest gave way to the first /healthz (408: its head was cut short); the
        # others found the room it left.
        evicted = await asyncio.wait_for(held[0][0].read(), 5)
        others_open = [not r.at_eof() for r, _ in held[1:20]]
        for _, writer in held:
            writer.close()
    assert most <= slow.max_connections
    assert {status_of(a) for a in burst} == {503}  # beyond the cap, younger than a tick
    assert [status_of(a) for a in health] == [200] * 3
    assert status_of(evicted) == 408
    assert all(others_open)


async def test_a_burst_beyond_the_cap_is_answered_503_rather_than_evicting_itself(
    sqlite_url: str,
) -> None:
    slow = ConnectionLimits(header_timeout=30, body_timeout=30, max_connections=10)
    async with bounded_inbox(make_config(sqlite_url), slow) as server:
        held = [await half_sent(server.port) for _ in range(10)]
        refused = await answer_to(server.port, HEALTHZ_CLOSE)  # the ten are younger than a tick
        for _, writer in held:
            writer.close()
    assert status_of(refused) == 503


async def test_when_every_connection_is_inside_a_request_a_new_one_is_answered_503(
    sqlite_url: str,
) -> None:
    slow = ConnectionLimits(header_timeout=30, body_timeout=30, max_connections=10)
    body_pending = HEAD + b"Content-Length: 100\r\n\r\n{"
    async with bounded_inbox(make_config(sqlite_url), slow) as server:
        held = [await half_sent(server.port, body_pending) for _ in range(10)]
        await asyncio.sleep(0.2)
        refused = await answer_to(server.port, HEALTHZ_CLOSE)
        for _, writer in held:
            writer.close()
        await asyncio.sleep(0.3)  # they went away: there is room again
        health = await answer_to(server.port, HEALTHZ_CLOSE)
    assert status_of(refused) == 503
    assert b"retry-after: 1" in refused.lower()
    assert status_of(health) == 200


async def test_deliveries_are_stored_while_slow_clients_are_cut_off(db_url: str) -> None:
    """On both stores: trickling heads and bodies end in 408 while twenty deliveries,
    sent meanwhile, are accepted and stored."""
    body, headers = delivery("evt_slow_body")
    body_head = HEAD + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items())
    body_head += b"Content-Length: %d\r\n\r\n" % len(body)
    roomy = dataclasses.replace(LIMITS, max_connections=100)
    async with bounded_inbox(make_config(db_url), roomy) as server:
        slow = [asyncio.create_task(trickle(server.port, drip=HEAD + HEAD_LINE)) for _ in range(5)]
        slow += [
            asyncio.create_task(trickle(server.port, first=body_head, drip=body)) for _ in range(5)
        ]
        await asyncio.sleep(0.1)
        answers = await asyncio.gather(
            *(answer_to(server.port, raw_delivery(f"evt_meanwhile_{n}")) for n in range(20))
        )
        outcomes = await asyncio.gather(*slow)
        counts = await server.inbox.store.count_rows()
    assert all(status_of(a) == 200 and b'"accepted"' in a for a in answers)
    assert [o.status for o in outcomes] == [408] * 10
    assert counts["deliveries"] == 20
