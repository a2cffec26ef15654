"""Issue 10 as a property, on both stores: whatever a sender sends -- any bytes, any
headers, bodies signed with the right secret so they reach the edge -- the answer is
200, 400, 404, 405, 413 or 431, never a 5xx; a refusal leaves no row; and every accepted
delivery's forward completes, its body, id and type carried exactly. The framing varies
too (over a raw socket): chunked in chunks of any size, with extensions and trailers,
pipelined behind another request, with ``Expect: 100-continue``; each is read exactly as
a Content-Length body. Hostile framing (``Upgrade``, oversized trailers, a broken chunk
size, Content-Length beside chunked) is refused, closed, and never re-parsed.

One running inbox per test (on a thread of its own, so hypothesis drives it with a plain
client), a counting target that answers 200, and a bounded number of examples
(``HOOKINBOX_PROPERTY_EXAMPLES``, 300 by default) with no per-example deadline. Each
finding of the issue is also sent as such first, so every run goes through them all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hookinbox.store import Store
from hookinbox.verify.standard_webhooks import decode_secret, signature_of
from tests.support.inbox import InboxInThread, make_config
from tests.support.signing import SECRET, WRONG_SECRET
from tests.support.target import RecordingTarget

EXAMPLES = int(os.environ.get("HOOKINBOX_PROPERTY_EXAMPLES", "300"))
MAX_BODY = 65_536
#: 431 is the HTTP server's own refusal of oversized headers, once it has a limit.
ALLOWED = {200, 400, 404, 405, 413, 431}
KEPT_PREFIXES = ["webhook-x", "svix-x", "stripe-x", "x-github-x", "x-shopify-x", "x-slack-x"]


@dataclass(frozen=True)
class Recipe:
    """How to make one request: every field's default is a clean delivery."""

    raw_id: bytes = b"evt_clean"
    event_type: str = "crm.lead.created"
    data: Any = None
    depth: int = 0
    shape: str = "object"
    ensure_ascii: bool = True
    encoding: str = "utf-8"
    junk_body: bytes | None = None
    too_large: bool = False
    stamp: str | None = None  # None: now
    secret: str = SECRET
    signature: bool = True
    extra_headers: tuple[tuple[str, bytes], ...] = ()
    source: str = "test"
    method: str = "POST"
    #: How the request is framed on the wire (sent over a raw socket unless "length").
    framing: str = "length"
    chunk: int = 64
    faults: tuple[str, ...] = ()

    def body(self) -> bytes:
        def dumps(value: Any) -> str:
            return json.dumps(value, ensure_ascii=self.ensure_ascii, allow_nan=True)

        data = {"n": 1} if self.data is None else self.data
        nested = "[" * self.depth + dumps(data) + "]" * self.depth  # json.dumps would recurse
        text = {
            "object": f'{{"type": {dumps(self.event_type)}, "data": {nested}}}',
            "list": f"[{dumps(self.event_type)}]",
            "number": "1",
            "null": "null",
        }[self.shape]
        if self.junk_body is not None:
            body = self.junk_body
        elif self.encoding == "utf-8":
            body = text.encode("utf-8", "surrogatepass")
        elif self.encoding == "bom":
            body = b"\xef\xbb\xbf" + text.encode("utf-8", "surrogatepass")
        else:
            body = text.encode(self.encoding, "surrogatepass")
        return body + (b" " * MAX_BODY if self.too_large else b"")

    def request(self) -> tuple[str, str, bytes, list[tuple[bytes, bytes]]]:
        body = self.body()
        stamp = str(int(time.time())) if self.stamp is None else self.stamp
        # hookinbox reads header bytes as ISO-8859-1 and signs the id as UTF-8 text.
        event_id = self.raw_id.decode("latin-1")
        signature = "v1," + signature_of(decode_secret(self.secret), event_id, stamp, body)
        headers = [
            (b"webhook-id", self.raw_id),
            (b"webhook-timestamp", stamp.encode("latin-1")),
            (b"content-type", b"application/json"),
        ]
        if self.signature:
            headers.append((b"webhook-signature", signature.encode()))
        headers += [(name.encode(), value) for name, value in self.extra_headers]
        return self.method, f"/webhooks/{self.source}", body, headers


def wire_bytes(raw: bytes) -> bytes:
    """``raw`` as a header value an HTTP/1.1 client can send: no control bytes, no
    surrounding spaces (a server strips them). Bytes 0x80-0xFF stay."""
    return bytes(b if b >= 0x20 and b != 0x7F else 0x78 for b in raw).strip(b" ")


ANY_CHAR = st.characters(codec=None, exclude_categories=())  # surrogates and controls too
PLAIN_TYPE = st.from_regex(r"[a-z]{1,10}(\.[a-z_]{1,10}){0,3}", fullmatch=True)
FAULTS: dict[str, st.SearchStrategy[Any]] = {
    "raw_id": st.one_of(
        st.from_regex(r"[A-Za-z0-9_.:-]{1,40}", fullmatch=True).map(str.encode),
        st.binary(min_size=1, max_size=300).map(wire_bytes),
        st.text(ANY_CHAR, min_size=1, max_size=60).map(
            lambda s: wire_bytes(s.encode("utf-8", "surrogatepass"))
        ),
        st.integers(250, 4000).map(lambda n: b"e" * n),
    ),
    "event_type": st.one_of(
        st.text(ANY_CHAR, max_size=40),
        st.integers(250, 3000).map(lambda n: "t" * n),
        st.sampled_from(["r\u00e9ponse.completed", "crm\n", "crm\r", "crm\x00", "\ud800", "\x85"]),
    ),
    "data": st.recursive(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-(10**120), 10**120),
            st.floats(allow_nan=True, allow_infinity=True),
            st.text(ANY_CHAR, max_size=30),
        ),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.text(ANY_CHAR, max_size=8), inner, max_size=4)
        ),
        max_leaves=20,
    ),
    "depth": st.sampled_from([1, 50, 126, 127, 128, 1100, 2000]),
    "shape": st.sampled_from(["list", "number", "null"]),
    "encoding": st.sampled_from(["bom", "utf-16", "utf-32"]),
    "junk_body": st.binary(max_size=2000),
    "too_large": st.just(True),
    "stamp": st.one_of(
        st.integers(1, 5000).map(lambda n: "9" * n),
        st.integers(-20_000, 20_000).map(lambda d: str(int(time.time()) + d)),
        st.sampled_from(["\u00b2", "+1700000000", "1_700_000_000", "", "1.5", "-5"]),
    ),
    "secret": st.just(WRONG_SECRET),
    "signature": st.just(False),
    # Many small headers, and at most one past the edge's 4 KiB: about 10 KB in all, within
    # what any HTTP server takes, so the edge is what answers.
    "extra_headers": st.tuples(
        st.lists(
            st.tuples(
                st.sampled_from(
                    [*KEPT_PREFIXES, "authorization", "x-request-id", "cookie"]
                ).flatmap(lambda p: st.integers(0, 60).map(lambda n: f"{p}-{n}")),
                st.binary(max_size=64).map(wire_bytes),
            ),
            max_size=45,
        ),
        st.lists(
            st.tuples(
                st.sampled_from(KEPT_PREFIXES), st.integers(3000, 6000).map(lambda n: b"v" * n)
            ),
            max_size=1,
        ),
    ).map(lambda lists: tuple(lists[0] + lists[1])),
    "source": st.sampled_from(["nope", quote("\u00df/x", safe=""), "a" * 300]),
    "method": st.sampled_from(["GET", "PUT"]),
    "framing": st.sampled_from(["upgrade", "big_trailers", "bad_chunk", "length_and_chunked"]),
}
#: Framings a real sender uses: each must be read exactly as a Content-Length body.
CLEAN_FRAMINGS = ["length"] * 5 + ["raw_length", "chunked", "trailers", "pipelined", "expect"]
HEALTHZ_CLOSE = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


def chunked(body: bytes, size: int, framing: str) -> bytes:
    """``body`` as a chunked body of ``size``-byte chunks (with an extension), and the
    trailers or the broken framing ``framing`` asks for."""
    parts = [
        b"%x;n=1\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size])
        for i in range(0, len(body), size)
    ]
    if framing == "bad_chunk":
        parts.insert(0, b"zz\r\n")
    trailers = {
        "trailers": b"X-Trailer: 1\r\nX-Other: two\r\n",
        "big_trailers": b"X-T: " + b"a" * 70_000 + b"\r\n",
    }.get(framing, b"")
    return b"".join(parts) + b"0\r\n" + trailers + b"\r\n"


def raw_request(recipe: Recipe) -> bytes:
    method, path, body, headers = recipe.request()
    framing = recipe.framing
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: 127.0.0.1"]
    lines += [name + b": " + value for name, value in headers]
    if framing == "upgrade":
        lines += [b"Connection: Upgrade", b"Upgrade: foo"]
    elif framing != "pipelined":
        lines.append(b"Connection: close")
    if framing == "expect":
        lines.append(b"Expect: 100-continue")
    if framing in ("chunked", "trailers", "big_trailers", "bad_chunk", "length_and_chunked"):
        lines.append(b"Transfer-Encoding: chunked")
        if framing == "length_and_chunked":
            lines.append(b"Content-Length: %d" % len(body))
        payload = chunked(body, recipe.chunk, framing)
    else:
        lines.append(b"Content-Length: %d" % len(body))
        payload = body
    request = b"\r\n".join(lines) + b"\r\n\r\n" + payload
    return request + HEALTHZ_CLOSE if framing == "pipelined" else request


def answers_in(data: bytes) -> list[tuple[int, bytes]]:
    """The final answers (status, body) in what the server sent, in order."""
    found: list[tuple[int, bytes]] = []
    pos = 0
    while (end := data.find(b"\r\n\r\n", pos)) >= 0:
        lines = data[pos:end].split(b"\r\n")
        status = int(lines[0].split()[1])
        fields = dict(
            (name.strip().lower(), value.strip())
            for name, _, value in (line.partition(b":") for line in lines[1:])
        )
        pos = end + 4
        if status < 200:
            continue
        length = int(fields.get(b"content-length", len(data) - pos))
        found.append((status, data[pos : pos + length]))
        pos += length
    return found


def exchange(port: int, request: bytes) -> list[tuple[int, bytes]]:
    """Send ``request`` on a new connection; the answers until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        with contextlib.suppress(OSError):
            sock.sendall(request)
        chunks = []
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    return answers_in(b"".join(chunks))


@st.composite
def recipes(draw: st.DrawFn) -> Recipe:
    """A clean delivery with a new id and type, and now and then a few hostile fields."""
    changes: dict[str, Any] = {
        # A fresh id (numbered when sent), or now and then the one id every repeat shares.
        "raw_id": draw(st.sampled_from([b"evt_new"] * 4 + [b"evt_repeat"])),
        "event_type": draw(PLAIN_TYPE),
        "data": {"n": draw(st.integers(0, 10**6))},
        "ensure_ascii": draw(st.booleans()),
        "framing": draw(st.sampled_from(CLEAN_FRAMINGS)),
        "chunk": draw(st.integers(1, 300)),
    }
    for name, strategy in FAULTS.items():
        if draw(st.integers(0, 9)) == 5:  # not 0, which hypothesis favours
            changes[name] = draw(strategy)
            changes["faults"] = (*changes.get("faults", ()), name)
    return dataclasses.replace(Recipe(), **changes)


FINDINGS = [
    Recipe(raw_id=b"evt_f1_309", stamp="9" * 309, faults=("stamp",)),
    Recipe(raw_id=b"evt_f1_4300", stamp="9" * 4300, faults=("stamp",)),
    Recipe(raw_id=b"evt_f2", depth=2000, faults=("depth",)),
    Recipe(raw_id=b"evt_f3_accent", event_type="r\u00e9ponse.completed"),
    Recipe(raw_id=b"evt_f3_accent_raw", event_type="r\u00e9ponse.completed", ensure_ascii=False),
    *(
        Recipe(raw_id=f"evt_f3_{n}".encode(), event_type=t, faults=("event_type",))
        for n, t in enumerate(["crm\n", "crm\r", "crm\x00"])
    ),
    Recipe(raw_id=b"evt_f4_surrogate", event_type="\ud800", faults=("event_type",)),
    Recipe(raw_id=b"evt_f4_nul", data={"note": "a\x00b"}, faults=("data",)),
    Recipe(raw_id=b"e" * 3000, faults=("raw_id",)),
    Recipe(raw_id=b"i" * 100_000, faults=("raw_id",)),
    Recipe(raw_id=b"evt_f6_utf16", encoding="utf-16", faults=("encoding",)),
    Recipe(raw_id=b"evt_f6_bom", encoding="bom", faults=("encoding",)),
    Recipe(raw_id=b"evt_f6_nan", data={"n": float("nan")}, faults=("data",)),
    Recipe(
        raw_id=b"evt_f6_header",
        extra_headers=(("x-github-note", b"n" * 5000),),
        faults=("extra_headers",),
    ),
    Recipe(raw_id=b"evt_f6_latin1_id_\xe9"),
    *(
        Recipe(raw_id=f"evt_framing_{framing}".encode(), framing=framing, chunk=5)
        for framing in CLEAN_FRAMINGS[5:]
    ),
    *(
        Recipe(raw_id=f"evt_framing_{framing}".encode(), framing=framing, faults=("framing",))
        for framing in ("upgrade", "big_trailers", "bad_chunk", "length_and_chunked")
    ),
]


def _run(db_url: str) -> None:
    with RecordingTarget() as target:
        config = make_config(
            db_url,
            routes=[{"events": ["*"], "action": "relay", "forward": target.url}],
            source={"max_body_bytes": MAX_BODY},
            worker={"max_attempts": 3, "backoff_base_seconds": 0.1, "lease_seconds": 10},
        )
        threaded = InboxInThread(config)
        accepted: dict[str, tuple[str, bytes, str]] = {}  # delivery id -> id, body, type
        answers: dict[str, int] = {}
        with threaded as inbox, httpx.Client(timeout=30) as client:
            store: Store = inbox.store

            def received_rows() -> tuple[int, int, int]:
                """What only the receiver writes (workers add attempts and effects)."""
                counts = threaded.call(store.count_rows())
                return counts["deliveries"], counts["jobs"], counts["payloads"]

            sent = iter(range(10**9))

            def one_delivery(recipe: Recipe) -> None:
                if recipe.raw_id == b"evt_new":
                    recipe = dataclasses.replace(recipe, raw_id=b"evt_new_%d" % next(sent))
                method, path, body, headers = recipe.request()
                before = received_rows()
                if recipe.framing == "length":
                    answer = client.request(
                        method, inbox.base_url + path, content=body, headers=headers
                    )
                    status, text = answer.status_code, answer.text
                else:
                    port = int(inbox.base_url.rsplit(":", 1)[1])
                    raw = exchange(port, raw_request(recipe))
                    assert raw, recipe.framing
                    status, text = raw[0][0], raw[0][1].decode("utf-8", "replace")
                    if recipe.framing == "upgrade":  # refused, closed: its body never ran
                        assert raw == [(400, b"upgrade_refused")], raw
                    if recipe.framing == "pipelined" and status == 200:
                        assert [a[0] for a in raw[1:]] == [200], raw  # and nothing more
                    elif recipe.framing != "pipelined":
                        assert len(raw) == 1, raw
                summary = f"{status} {text[:40]}"
                answers[summary] = answers.get(summary, 0) + 1
                assert status in ALLOWED, summary
                if not recipe.faults:
                    assert status == 200, summary
                if status != 200:
                    assert received_rows() == before, summary
                    return
                receipt = json.loads(text)
                assert receipt["status"] in ("accepted", "duplicate"), receipt
                if receipt["status"] == "accepted":
                    event_id = recipe.raw_id.decode("latin-1")
                    accepted[receipt["delivery_id"]] = (event_id, body, json.loads(body)["type"])

            for finding in FINDINGS:
                one_delivery(finding)
            settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )(given(recipe=recipes())(one_delivery))()

            deadline = time.monotonic() + 60
            pending = set(accepted)
            while pending and time.monotonic() < deadline:
                for delivery_id in sorted(pending):
                    found = threaded.call(store.journal.get_delivery(delivery_id))
                    assert found is not None and found.status != "failed", delivery_id
                    if found.status == "completed":
                        pending.discard(delivery_id)
                time.sleep(0.1)
            assert not pending, f"{len(pending)} accepted deliveries never completed"
    print(json.dumps(answers, indent=1, sort_keys=True), f"accepted: {len(accepted)}")
    assert len(accepted) >= 10, answers
    forwarded = {r["headers"]["idempotency-key"]: r for r in target.requests}
    for delivery_id, (event_id, body, event_type) in accepted.items():
        request = forwarded[f"{delivery_id}:relay"]
        assert request["body"] == body
        assert unquote(request["headers"]["x-hookinbox-event-id"]) == event_id
        assert unquote(request["headers"]["x-hookinbox-event-type"]) == event_type


def test_no_sender_gets_a_5xx_or_leaves_a_row_for_a_refusal(db_url: str) -> None:
    started = time.monotonic()
    _run(db_url)
    elapsed = time.monotonic() - started
    print(f"{EXAMPLES} examples and {len(FINDINGS)} findings in {elapsed:.1f} s")
