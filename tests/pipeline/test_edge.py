"""Issue 10, one scenario per finding of the hostile sender, through the real inbox on both
stores: a refusal is a 400 with its code and leaves nothing; what is accepted is stored,
forwarded and logged; nothing the sender shapes makes a 500 or a traceback."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
import structlog

from hookinbox.config import Config
from hookinbox.errors import PayloadTooLarge
from hookinbox.receive.endpoint import read_body
from tests.support.inbox import make_config, running_inbox
from tests.support.signing import delivery, signed_bytes
from tests.support.target import RecordingTarget
from tests.support.waiting import wait_for_status


def forward_config(db_url: str, url: str) -> Config:
    return make_config(
        db_url,
        routes=[{"events": ["*"], "action": "relay", "forward": url}],
        worker={"max_attempts": 2, "backoff_base_seconds": 0.1},
    )


def event(event_type: str, **data: Any) -> bytes:
    """A body whose ``type`` may hold anything, escaped as JSON does (ensure_ascii)."""
    return json.dumps({"type": event_type, "data": data}).encode()


async def refused(
    db_url: str, client: httpx.AsyncClient, body: bytes, headers: dict[str, Any]
) -> tuple[int, Any, dict[str, int]]:
    """POST once to a fresh inbox: the status, the answer, and the store's row counts."""
    async with running_inbox(make_config(db_url)) as inbox:
        answer = await client.post(inbox.url(), content=body, headers=headers)
        counts = await inbox.store.count_rows()
    return answer.status_code, answer.json(), counts


def nothing_stored(counts: dict[str, int]) -> bool:
    return counts["deliveries"] == counts["jobs"] == counts["payloads"] == 0


# -- 1. timestamps ---------------------------------------------------------------------------
@pytest.mark.parametrize("digits", [309, 4000, 4301])
async def test_a_timestamp_of_4000_digits_is_refused_without_a_traceback(
    db_url: str, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture, digits: int
) -> None:
    body, headers = signed_bytes(event("crm.lead.created"), stamp="9" * digits)
    with caplog.at_level(logging.ERROR):
        status, answer, counts = await refused(db_url, client, body, headers)
    assert (status, answer) == (400, {"error": "timestamp_out_of_tolerance"})
    assert nothing_stored(counts)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


# -- 2. depth --------------------------------------------------------------------------------
async def test_a_signed_body_nested_2000_deep_is_refused_as_too_deep(
    db_url: str, client: httpx.AsyncClient
) -> None:
    deep = b'{"type": "crm.lead.created", "data": ' + b"[" * 2000 + b"]" * 2000 + b"}"
    status, answer, counts = await refused(db_url, client, *signed_bytes(deep))
    assert (status, answer) == (400, {"error": "body_too_deep"})
    assert nothing_stored(counts)


# -- 3. types a forward could not carry --------------------------------------------------------
async def test_a_non_ascii_event_type_is_accepted_and_forwarded_percent_encoded(
    db_url: str, client: httpx.AsyncClient
) -> None:
    body, headers = signed_bytes(event("r\u00e9ponse.completed"), event_id="evt_accent")
    with RecordingTarget() as target:
        async with running_inbox(forward_config(db_url, target.url)) as inbox:
            answer = await client.post(inbox.url(), content=body, headers=headers)
            assert answer.json()["status"] == "accepted"
            await wait_for_status(inbox.store, "evt_accent", "completed")
    (request,) = target.requests
    assert request["headers"]["x-hookinbox-event-type"] == "r%C3%A9ponse.completed"
    assert unquote(request["headers"]["x-hookinbox-event-type"]) == "r\u00e9ponse.completed"
    assert request["body"] == body


@pytest.mark.parametrize(
    ("event_type", "code"),
    [
        ("crm.lead\n", "invalid_event_type"),
        ("crm\rlead", "invalid_event_type"),
        ("crm\x1b[31m", "invalid_event_type"),
        ("crm\x00lead", "nul_in_body"),  # a NUL anywhere in a body is refused as such
    ],
)
async def test_an_event_type_with_a_control_character_is_refused(
    db_url: str, client: httpx.AsyncClient, event_type: str, code: str
) -> None:
    status, answer, counts = await refused(db_url, client, *signed_bytes(event(event_type)))
    assert (status, answer) == (400, {"error": code})
    assert nothing_stored(counts)


# -- 4. rows that would poison a batch -----------------------------------------------------------
async def test_a_lone_surrogate_type_is_refused_and_the_deliveries_beside_it_commit(
    db_url: str, client: httpx.AsyncClient
) -> None:
    poison = signed_bytes(b'{"type": "\\ud800"}', event_id="evt_poison")
    good = [delivery(f"evt_beside_{n}") for n in range(10)]
    async with running_inbox(make_config(db_url), run_workers=False) as inbox:
        answers = await asyncio.gather(
            *(client.post(inbox.url(), content=b, headers=h) for b, h in [poison, *good])
        )
        counts = await inbox.store.count_rows()
    assert (answers[0].status_code, answers[0].json()) == (400, {"error": "malformed_json"})
    assert [a.json()["status"] for a in answers[1:]] == ["accepted"] * 10
    assert counts["deliveries"] == 10


async def test_a_3000_character_webhook_id_is_refused(
    db_url: str, client: httpx.AsyncClient
) -> None:
    body, headers = signed_bytes(event("crm.lead.created"), event_id="e" * 3000)
    status, answer, counts = await refused(db_url, client, body, headers)
    assert (status, answer) == (400, {"error": "invalid_event_id"})
    assert nothing_stored(counts)


async def test_a_webhook_id_of_latin1_bytes_within_the_limit_is_stored_and_forwarded(
    db_url: str, client: httpx.AsyncClient
) -> None:
    raw_id = "evt_caf\u00e9".encode()  # UTF-8 on the wire, read as ISO-8859-1
    body, headers = signed_bytes(event("crm.lead.created"), event_id=raw_id)
    with RecordingTarget() as target:
        async with running_inbox(forward_config(db_url, target.url)) as inbox:
            answer = await client.post(inbox.url(), content=body, headers=headers)
            assert answer.json()["status"] == "accepted"
            await wait_for_status(inbox.store, raw_id.decode("latin-1"), "completed")
    (request,) = target.requests
    assert unquote(request["headers"]["x-hookinbox-event-id"]) == raw_id.decode("latin-1")


# -- 6. sizes, encodings, logs -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("length", "refusal"),
    [(2_000, (400, "invalid_event_id")), (100_000, (431, None))],
    ids=["2-kb-id-refused-by-the-edge", "100-kb-id-refused-by-the-server"],
)
async def test_a_long_webhook_id_is_refused_and_no_log_line_carries_it(
    db_url: str, client: httpx.AsyncClient, length: int, refusal: tuple[int, str | None]
) -> None:
    """The edge refuses an id over 255 bytes; a head over the server's header limit
    (64 KiB by default) is answered 431 before the edge. Either way: refused, stored
    nowhere, logged nowhere."""
    body, headers = signed_bytes(event("crm.lead.created"), event_id="i" * length)
    with structlog.testing.capture_logs() as lines:
        async with running_inbox(make_config(db_url)) as inbox:
            sent = await client.post(inbox.url(), content=body, headers=headers)
            counts = await inbox.store.count_rows()
    status, code = refusal
    assert sent.status_code == status
    if code is not None:
        assert sent.json() == {"error": code}
    assert nothing_stored(counts)
    assert not [line for line in lines if "i" * 300 in json.dumps(line, default=str)]


@pytest.mark.parametrize(
    "extra",
    [
        {"x-github-note": "n" * 5000},  # one provider header past 4 KiB
        {f"x-github-extra-{n}": "v" for n in range(40)},  # 40 provider headers
    ],
    ids=["one-5-kb-header", "40-headers"],
)
async def test_provider_headers_beyond_the_bounds_are_refused(
    db_url: str, client: httpx.AsyncClient, extra: dict[str, str]
) -> None:
    body, headers = signed_bytes(event("crm.lead.created"))
    status, answer, counts = await refused(db_url, client, body, {**headers, **extra})
    assert (status, answer) == (400, {"error": "invalid_headers"})
    assert nothing_stored(counts)


@pytest.mark.parametrize(
    "body",
    [
        b"\xef\xbb\xbf" + event("crm.lead.created"),
        event("crm.lead.created").decode().encode("utf-16"),
        event("crm.lead.created").decode().encode("utf-32"),
        b'{"type": "crm.lead.created", "amount": NaN}',
        b'{"type": "crm.lead.created", "amount": -Infinity}',
    ],
    ids=["utf8-bom", "utf-16", "utf-32", "nan", "infinity"],
)
async def test_bodies_that_are_not_strict_utf8_json_are_malformed(
    db_url: str, client: httpx.AsyncClient, body: bytes
) -> None:
    status, answer, counts = await refused(db_url, client, *signed_bytes(body))
    assert (status, answer) == (400, {"error": "malformed_json"})
    assert nothing_stored(counts)


# -- the last line of defence ------------------------------------------------------------------
class _Exploding:
    def verify(self, body: bytes, headers: Any, *, now: float) -> Any:
        raise RuntimeError(f"CANARY {body!r}")  # a message that quotes the payload


async def test_an_unexpected_exception_answers_500_internal_with_one_log_line_and_a_count(
    sqlite_url: str, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    body, headers = delivery("evt_explodes", note="CANARY")
    with structlog.testing.capture_logs() as lines, caplog.at_level(logging.DEBUG):
        async with running_inbox(make_config(sqlite_url)) as inbox:
            inbox.inbox.receiver._verifiers["test"] = _Exploding()
            answer = await client.post(inbox.url(), content=body, headers=headers)
            metrics = (await client.get(f"{inbox.base_url}/metrics")).text
            counts = await inbox.store.count_rows()
    assert (answer.status_code, answer.json()) == (500, {"error": "internal"})
    (line,) = [line for line in lines if line["event"] == "internal_error"]
    assert line["exception"] == "RuntimeError" and line["at"].startswith("test_edge.py:")
    assert "CANARY" not in json.dumps(lines, default=str)
    assert not [r for r in caplog.records if r.exc_info or "CANARY" in r.getMessage()]
    assert 'hookinbox_deliveries_total{outcome="internal",source="test"} 1.0' in metrics
    assert nothing_stored(counts)


@pytest.mark.parametrize("declared", ["\u00b2", "9" * 5000, "-1", "1e9"])
async def test_an_odd_content_length_is_no_crash(declared: str) -> None:
    messages = [{"type": "http.request", "body": b"{}", "more_body": False}]

    async def receive() -> Any:
        return messages.pop(0)

    if declared.isascii() and declared.isdigit():
        with pytest.raises(PayloadTooLarge):
            await read_body(receive, {"content-length": declared}, 1024)
    else:
        assert await read_body(receive, {"content-length": declared}, 1024) == b"{}"
