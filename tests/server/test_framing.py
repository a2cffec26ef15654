"""The chunked decoder and the body's length, on their own: whatever the chunk sizes and
however the bytes are split across reads, the body comes out exactly; framing and
trailers count against the budget; the work is linear in the bytes fed."""

from __future__ import annotations

import itertools
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from hookinbox.server.framing import (
    BAD_CHUNK,
    BAD_LENGTH,
    BAD_TRANSFER_ENCODING,
    FRAMING_TOO_LARGE,
    MAX_TRAILER_FIELDS,
    ChunkedBody,
    Refusal,
    body_framing,
)


def encode(body: bytes, sizes: list[int], trailers: bytes = b"") -> bytes:
    parts, pos, i = [], 0, 0
    while pos < len(body):
        size = sizes[i % len(sizes)]
        piece = body[pos : pos + size]
        parts.append(b"%x;ext=%d\r\n%s\r\n" % (len(piece), i, piece))
        pos, i = pos + size, i + 1
    return b"".join(parts) + b"0\r\n" + trailers + b"\r\n"


def feed(wire: bytes, cuts: list[int], budget: int = 65_536) -> tuple[bytes, int | Refusal]:
    """Feed ``wire`` split at ``cuts``; the body and the bytes used (or the refusal)."""
    decoder, out, used = ChunkedBody(budget), bytearray(), 0
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(wire)), len(wire)]
    for start, end in itertools.pairwise(bounds):
        result = decoder.feed(wire[start:end], out)
        if isinstance(result, Refusal):
            return bytes(out), result
        used += result
        if decoder.done:
            break
    return bytes(out), used


@settings(max_examples=200, deadline=None)
@given(
    body=st.binary(max_size=3000),
    sizes=st.lists(st.integers(1, 700), min_size=1, max_size=5),
    cuts=st.lists(st.integers(0, 6000), max_size=30),
    trailers=st.sampled_from([b"", b"X-A: 1\r\n", b"X-A: 1\r\nX-B: two words\r\n"]),
    after=st.sampled_from([b"", b"GET / HTTP/1.1\r\n\r\n"]),
)
def test_any_chunking_and_any_split_decodes_the_body_exactly(
    body: bytes, sizes: list[int], cuts: list[int], trailers: bytes, after: bytes
) -> None:
    wire = encode(body, sizes, trailers)
    decoded, used = feed(wire + after, cuts)
    assert decoded == body
    assert used == len(wire)  # and not a byte of the next request


def test_framing_beyond_the_budget_and_too_many_trailers_are_refused() -> None:
    assert feed(encode(b"{}", [2], b"X-T: " + b"a" * 5000 + b"\r\n"), [], 4096)[1] == (
        FRAMING_TOO_LARGE
    )
    fields = b"X-T: 1\r\n" * (MAX_TRAILER_FIELDS + 1)
    assert feed(encode(b"{}", [2], fields), [])[1] == FRAMING_TOO_LARGE
    assert feed(b"1;" + b"e" * 2000 + b"\r\n", [])[1] == BAD_CHUNK
    assert feed(b"zz\r\n", [])[1] == BAD_CHUNK
    assert feed(b"2\r\n{}XX", [])[1] == BAD_CHUNK
    assert feed(encode(b"{}", [2], b" folded: 1\r\n"), [])[1] == BAD_CHUNK


def test_a_trailer_fed_a_byte_at_a_time_costs_linear_time() -> None:
    """The whole budget in one-byte reads: each byte is scanned once (a value joined
    piece by piece, as httptools does, would copy it 64 K times)."""
    wire = b"2\r\n{}\r\n0\r\nX-T: " + b"a" * 70_000
    decoder, out = ChunkedBody(65_536), bytearray()
    started = time.process_time()
    for i in range(len(wire)):
        result = decoder.feed(wire[i : i + 1], out)
        if isinstance(result, Refusal):
            break
    took = time.process_time() - started
    assert result == FRAMING_TOO_LARGE
    assert took < 1.0, took


def test_the_body_length_comes_from_one_unambiguous_framing() -> None:
    assert body_framing([], [], "1.1") == 0
    assert body_framing([b"12"], [], "1.1") == 12
    assert body_framing([b"12", b"12"], [], "1.1") == 12
    assert body_framing([], [b"chunked"], "1.1") is None
    assert body_framing([b"12", b"13"], [], "1.1") == BAD_LENGTH
    assert body_framing([b"-1"], [], "1.1") == BAD_LENGTH
    assert body_framing([b"12"], [b"chunked"], "1.1") == BAD_TRANSFER_ENCODING
    assert body_framing([], [b"gzip, chunked"], "1.1") == BAD_TRANSFER_ENCODING
    assert body_framing([], [b"chunked"], "1.0") == BAD_TRANSFER_ENCODING
