"""The new senders through the real receiver and worker, on both stores: a Twilio form
(its query string signed), a Zoom handshake, HTTP Basic and an API key, and a source's
own answer body."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from twilio.request_validator import RequestValidator

from tests.support import handlers
from tests.support.inbox import make_config, running_inbox
from tests.support.signing import SECRET, SECRET_ENV
from tests.support.waiting import wait_for_status

FORM = "application/x-www-form-urlencoded"
RECORD = [{"events": ["*"], "action": "record", "handler": "tests.support.handlers:record"}]
PARAMS = {
    "MessageSid": "SM0000000000000000000000000000beef",
    "MessageStatus": "delivered",
    "To": "+15558675310",
    "Body": "",
}


async def test_a_twilio_form_is_verified_with_its_query_answered_with_twiml_and_handled(
    db_url: str, client: httpx.AsyncClient
) -> None:
    public = "https://hooks.example.com/webhooks/test"
    source = {
        "scheme": "twilio",
        "twilio": {"url": public, "type_pointer": "/MessageStatus"},
        "fingerprint": {"fields": ["/MessageSid", "/MessageStatus"]},
    }
    config = make_config(db_url, routes=RECORD, source=source)
    query = "tenant=acme&callback=1"
    signature = RequestValidator(SECRET).compute_signature(f"{public}?{query}", PARAMS)
    headers = {"x-twilio-signature": signature, "content-type": FORM}
    body = urlencode(PARAMS)
    async with running_inbox(config) as inbox:
        url = f"{inbox.url()}?{query}"
        first = await client.post(url, content=body, headers=headers)
        again = await client.post(url, content=body, headers=headers)
        wrong_query = await client.post(inbox.url(), content=body, headers=headers)
        assert first.status_code == again.status_code == 200
        assert first.headers["content-type"] == "text/xml"
        assert first.text.endswith("<Response></Response>")
        assert [first.headers["x-hookinbox-status"], again.headers["x-hookinbox-status"]] == [
            "accepted",
            "duplicate",
        ]
        assert (wrong_query.status_code, wrong_query.json()) == (
            400,
            {"error": "invalid_signature"},
        )
        delivery_id = first.headers["x-hookinbox-delivery-id"]
        await wait_for_status(inbox.store, delivery_id, "completed")
    (event_id,) = handlers.PAYLOADS
    assert event_id.startswith("fp:")
    assert handlers.PAYLOADS[event_id] == PARAMS  # the form's fields, read again by the worker


def zoom_headers(secret: str, body: bytes, stamp: int) -> dict[str, str]:
    signed = f"v0:{stamp}:".encode() + body
    return {
        "content-type": "application/json",
        "x-zm-request-timestamp": str(stamp),
        "x-zm-signature": "v0=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest(),
    }


async def test_zooms_url_validation_is_answered_and_never_queued(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, "zoom-old zoom-new")
    source = {
        "scheme": "hmac",
        "hmac": {
            "header": "x-zm-signature",
            "prefix": "v0=",
            "timestamp_header": "x-zm-request-timestamp",
            "signed_content": "v0:{timestamp}:{body}",
            "type_pointer": "/event",
            "handshake": "zoom",
        },
        "fingerprint": {"fields": ["/event", "/event_ts"]},
    }
    config = make_config(db_url, routes=RECORD, source=source)
    check = json.dumps(
        {"event": "endpoint.url_validation", "payload": {"plainToken": "tok_1"}, "event_ts": 1}
    ).encode()
    event = json.dumps({"event": "meeting.started", "event_ts": 2, "payload": {}}).encode()
    async with running_inbox(config) as inbox:
        now = int(time.time())
        answer = await client.post(
            inbox.url(), content=check, headers=zoom_headers("zoom-new", check, now)
        )
        forged = await client.post(
            inbox.url(), content=check, headers=zoom_headers("guess", check, now)
        )
        accepted = await client.post(
            inbox.url(), content=event, headers=zoom_headers("zoom-old", event, now)
        )
        expected = hmac.new(b"zoom-new", b"tok_1", hashlib.sha256).hexdigest()
        assert (answer.status_code, answer.json()) == (
            200,
            {"plainToken": "tok_1", "encryptedToken": expected},
        )
        assert (forged.status_code, forged.json()) == (400, {"error": "invalid_signature"})
        assert accepted.json()["status"] == "accepted"
        await wait_for_status(inbox.store, accepted.json()["delivery_id"], "completed")
        assert (await inbox.store.count_rows())["deliveries"] == 1


@pytest.mark.parametrize("scheme", ["basic", "api-key"])
async def test_a_static_credential_is_checked_and_never_stored(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, scheme: str
) -> None:
    monkeypatch.setenv(SECRET_ENV, "hooks:pa55word" if scheme == "basic" else "key-2026")
    credentials: dict[str, Any] = {"id_pointer": "/id"}
    if scheme == "api-key":
        credentials |= {"header": "x-shopify-api-key"}  # a kept prefix: still never kept
    config = make_config(
        db_url,
        routes=RECORD,
        source={"scheme": scheme, "credentials": credentials, "answer": {"text": ""}},
    )
    if scheme == "basic":
        good = {"authorization": "Basic " + base64.b64encode(b"hooks:pa55word").decode()}
        bad = {"authorization": "Basic " + base64.b64encode(b"hooks:guess").decode()}
    else:
        good, bad = {"x-shopify-api-key": "key-2026"}, {"x-shopify-api-key": "key-2025"}
    body = json.dumps({"id": "evt_cred_1", "type": "order.paid"}).encode()
    async with running_inbox(config) as inbox:
        ok = await client.post(
            inbox.url(), content=body, headers={**good, "content-type": "application/json"}
        )
        refused = await client.post(inbox.url(), content=body, headers=bad)
        missing = await client.post(inbox.url(), content=body)
        assert (ok.status_code, ok.content, ok.headers["x-hookinbox-status"]) == (
            200,
            b"",
            "accepted",
        )
        assert ok.headers["content-type"] == "text/plain; charset=utf-8"
        assert (refused.status_code, refused.json()) == (400, {"error": "invalid_credentials"})
        assert (missing.status_code, missing.json()) == (400, {"error": "missing_headers"})
        await wait_for_status(inbox.store, "evt_cred_1", "completed")
    assert handlers.CALLS["evt_cred_1"] == 1
    # What the worker read back from the store: the content type, never the credential.
    assert handlers.HEADERS["evt_cred_1"] == {"content-type": "application/json"}


async def test_a_json_answer_replaces_the_default_body(
    db_url: str, client: httpx.AsyncClient
) -> None:
    from tests.support.signing import delivery

    config = make_config(db_url, source={"answer": {"json": {"received": True}, "status": 202}})
    body, headers = delivery("evt_answer_1")
    async with running_inbox(config) as inbox:
        answer = await client.post(inbox.url(), content=body, headers=headers)
        refused = await client.post(inbox.url(), content=body + b" ", headers=headers)
    assert (answer.status_code, answer.json()) == (202, {"received": True})
    assert answer.headers["x-hookinbox-delivery-id"].startswith("dlv_")
    assert (refused.status_code, refused.json()) == (400, {"error": "invalid_signature"})
