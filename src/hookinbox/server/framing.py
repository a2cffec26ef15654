"""A request's framing: where its head ends, what its body's length is, and a chunked
decoder that counts every byte.

httptools (llhttp) parses the head only, fed once, whole: it is strict (CRLF line ends,
token characters, one Content-Length) and fast. The body is framed here, because llhttp
leaves two things unbounded: trailers (any size; httptools joins a header value's pieces
with ``bytes +=``, so a value fed in many reads costs quadratic time) and chunk framing
(size lines and extensions of any length). Here every byte after the head that is not
body is counted against one budget per request, lines are scanned once (a partial line
is never searched again from its start), and so the work is linear in what arrives.
"""

from __future__ import annotations

from dataclasses import dataclass

#: At most this many trailer fields after a chunked body.
MAX_TRAILER_FIELDS = 32
#: A chunk-size line (size and extensions) longer than this is refused.
MAX_CHUNK_LINE = 1024

_HEX = frozenset(b"0123456789abcdefABCDEF")


@dataclass(frozen=True)
class Refusal:
    """Why a request cannot be read further: the status answered and the short code
    (also the ``reason`` it is counted under)."""

    status: int
    code: str


MALFORMED = Refusal(400, "malformed_request")
UPGRADE = Refusal(400, "upgrade_refused")
#: An HTTP/1.1 request without a Host header, or any with two (RFC 9112 3.2).
BAD_HOST = Refusal(400, "bad_host")
BAD_LENGTH = Refusal(400, "bad_content_length")
BAD_TRANSFER_ENCODING = Refusal(400, "bad_transfer_encoding")
BAD_CHUNK = Refusal(400, "bad_chunk_framing")
FRAMING_TOO_LARGE = Refusal(431, "framing_too_large")
HEAD_TOO_LARGE = Refusal(431, "header_too_large")


def body_framing(
    lengths: list[bytes], transfer_encodings: list[bytes], http_version: str
) -> int | Refusal | None:
    """The body's length from the head's Content-Length and Transfer-Encoding values: a
    byte count, ``None`` for chunked, or why the head is refused. Conflicting or
    repeated-and-different lengths, a transfer coding other than ``chunked`` alone, or
    chunked in HTTP/1.0 are refused (RFC 9112 §6.3: a framing two parsers could read
    differently is how requests are smuggled)."""
    if transfer_encodings:
        codings = [t.strip().lower() for value in transfer_encodings for t in value.split(b",")]
        if lengths or codings != [b"chunked"] or http_version == "1.0":
            return BAD_TRANSFER_ENCODING
        return None
    if not lengths:
        return 0
    first = lengths[0].strip()
    if not first.isdigit() or len(first) > 18 or any(v.strip() != first for v in lengths):
        return BAD_LENGTH
    return int(first)


class ChunkedBody:
    """Decodes a chunked body fed in pieces, counting every byte of framing (size lines,
    extensions, CRLFs, trailers) against ``budget``; trailers are read and dropped (the
    app is not given them), at most :data:`MAX_TRAILER_FIELDS`."""

    __slots__ = ("_budget", "_data_left", "_line", "_state", "_trailers", "done")

    _SIZE, _DATA, _DATA_END, _TRAILER = range(4)

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._state = self._SIZE
        self._data_left = 0
        self._line = bytearray()
        self._trailers = 0
        self.done = False

    def feed(self, data: bytes | bytearray, out: bytearray) -> int | Refusal:
        """Decode from ``data``, appending body bytes to ``out``; how many bytes of
        ``data`` were used (fewer than all only once the body is done: the rest is the
        next request), or why the body is refused."""
        pos, end = 0, len(data)
        while pos < end and not self.done:
            state = self._state
            if state == self._DATA:
                take = min(self._data_left, end - pos)
                out += data[pos : pos + take]
                pos += take
                self._data_left -= take
                if not self._data_left:
                    self._state = self._DATA_END
                continue
            if state == self._DATA_END:
                # The CRLF after a chunk's data, possibly split across reads.
                need = 2 - len(self._line)
                self._line += data[pos : pos + need]
                pos += min(need, end - pos)
                if len(self._line) < 2:
                    continue
                if self._line != b"\r\n":
                    return BAD_CHUNK
                self._line.clear()
                self._budget -= 2
                self._state = self._SIZE
                continue
            # A line: a chunk size, or a trailer field (or the empty line ending them).
            limit = MAX_CHUNK_LINE if state == self._SIZE else self._budget
            newline = data.find(b"\n", pos)
            piece_end = end if newline < 0 else newline + 1
            self._line += data[pos:piece_end]
            pos = piece_end
            if len(self._line) > limit or len(self._line) > self._budget:
                return BAD_CHUNK if state == self._SIZE else FRAMING_TOO_LARGE
            if newline < 0:
                continue
            line = bytes(self._line)
            self._line.clear()
            self._budget -= len(line)
            if not line.endswith(b"\r\n"):
                return BAD_CHUNK
            refused = self._size_line(line) if state == self._SIZE else self._trailer(line)
            if refused is not None:
                return refused
        return pos

    def _size_line(self, line: bytes) -> Refusal | None:
        size = line[:-2].split(b";", 1)[0].rstrip(b" \t")
        if not size or len(size) > 16 or not _HEX.issuperset(size):
            return BAD_CHUNK
        self._data_left = int(size, 16)
        self._state = self._DATA if self._data_left else self._TRAILER
        return None

    def _trailer(self, line: bytes) -> Refusal | None:
        if line == b"\r\n":
            self.done = True
            return None
        self._trailers += 1
        if self._trailers > MAX_TRAILER_FIELDS:
            return FRAMING_TOO_LARGE
        name, colon, _ = line.partition(b":")
        if b"\r" in line[:-2] or not colon or not name or name[0] in b" \t" or name[-1] in b" \t":
            return BAD_CHUNK  # no field, or an obsolete line folding: refused (RFC 9112 §5.2)
        return None
