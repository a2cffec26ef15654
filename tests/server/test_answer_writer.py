"""An answer leaves in one write: the head is held until the body's first write.

Unit tests against a recording transport (what the server's protocol writes through),
then real sockets against the real app for the answers that have no body write (HEAD)
or whose first write is not the head (``100 Continue``).
"""

from __future__ import annotations

import asyncio

from hookinbox.server import AnswerWriter
from tests.server.support import HOST, answer_to, bounded_inbox, status_of
from tests.support.inbox import make_config
from tests.support.signing import delivery


class Recording:
    """The transport methods the writer uses, recording what reaches the socket."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 0


def writer_over(transport: Recording) -> AnswerWriter:
    return AnswerWriter(transport, asyncio.get_running_loop())  # type: ignore[arg-type]


async def test_a_head_and_its_body_go_out_in_one_write() -> None:
    transport = Recording()
    writer = writer_over(transport)
    writer.arm()
    writer.write(b"HTTP/1.1 200 OK\r\n\r\n")
    assert transport.writes == []
    writer.write(b'{"status":"accepted"}')
    assert transport.writes == [b'HTTP/1.1 200 OK\r\n\r\n{"status":"accepted"}']
    await asyncio.sleep(0)  # the end-of-turn flush finds nothing left
    assert len(transport.writes) == 1


async def test_only_the_head_is_held_a_streams_chunks_pass_straight_through() -> None:
    transport = Recording()
    writer = writer_over(transport)
    writer.arm()
    for chunk in (b"head", b"one", b"two", b"three"):
        writer.write(chunk)
    assert transport.writes == [b"headone", b"two", b"three"]


async def test_a_head_with_nothing_after_it_in_the_turn_is_written_at_the_turns_end() -> None:
    transport = Recording()
    writer = writer_over(transport)
    writer.arm()
    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert transport.writes == []
    await asyncio.sleep(0)
    assert transport.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    writer.write(b"next")  # not armed again: straight through
    assert transport.writes[-1] == b"next"


async def test_close_writes_a_held_head_first_and_other_calls_reach_the_transport() -> None:
    transport = Recording()
    writer = writer_over(transport)
    writer.arm()
    writer.write(b"head")
    assert writer.get_write_buffer_size() == 0
    writer.close()
    assert transport.writes == [b"head"] and transport.closed and writer.is_closing()
    await asyncio.sleep(0)  # the end-of-turn flush does not write after the close
    assert transport.writes == [b"head"]


async def test_unarmed_writes_are_not_held() -> None:
    transport = Recording()
    writer = writer_over(transport)
    writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    assert transport.writes == [b"HTTP/1.1 400 Bad Request\r\n\r\n"]


async def _exchange(port: int, head: bytes, body: bytes = b"") -> tuple[bytes, bytes]:
    """Send ``head``; read the interim answer when the request expects one, then send
    ``body`` and read the rest until the server closes."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(head)
        interim = b""
        if b"100-continue" in head:
            async with asyncio.timeout(5):
                interim = await reader.readuntil(b"\r\n\r\n")
        writer.write(body)
        async with asyncio.timeout(5):
            rest = await reader.read()
        return interim, rest
    finally:
        writer.close()


async def test_a_head_request_is_answered_with_its_head_alone(sqlite_url: str) -> None:
    request = b"HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    async with bounded_inbox(make_config(sqlite_url)) as server:
        answer = await answer_to(server.port, request)
    assert status_of(answer) == 200
    assert answer.endswith(b"\r\n\r\n")


async def test_a_delivery_expecting_100_continue_gets_it_then_its_answer(sqlite_url: str) -> None:
    body, headers = delivery("evt_continue")
    lines = [b"POST /webhooks/test HTTP/1.1", b"Host: 127.0.0.1", b"Expect: 100-continue"]
    lines += [f"{name}: {value}".encode() for name, value in headers.items()]
    lines += [b"Content-Length: %d" % len(body), b"Connection: close"]
    head = b"\r\n".join(lines) + b"\r\n\r\n"
    async with bounded_inbox(make_config(sqlite_url)) as server:
        interim, answer = await _exchange(server.port, head, body)
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert status_of(answer) == 200 and b'"accepted"' in answer
