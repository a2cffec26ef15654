"""Redaction before storage, through the real receiver over HTTP, on both stores: the
signature is checked over the original bytes, the payload row and the forward hold the
marker (or a keyed hash), the forward carries ``x-hookinbox-redacted`` and no provider
signature, handlers see the redacted payload, and a canary value in a redacted field is
nowhere: not in the database's bytes (SQLite's file and WAL, PostgreSQL's rows), the
forwarded request or the logs. Without the rule the same canary is found everywhere, so
the search can fail."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import structlog

from hookinbox.config import Config
from hookinbox.redaction import MARKER, keyed_hash
from tests.support import handlers
from tests.support.inbox import make_config, running_inbox
from tests.support.rows import every_row, sqlite_file_bytes
from tests.support.signing import SECRET_ENV, signed
from tests.support.target import RecordingTarget
from tests.support.waiting import wait_for, wait_for_status

HASH_KEY = "privacy-test-key-0123456789abcdef-0123456789"
RECORD = {"events": ["*"], "action": "record", "handler": "tests.support.handlers:record"}


@pytest.fixture(autouse=True)
def _hash_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKINBOX_HASH_KEY", HASH_KEY)


def body_with(event_id: str, **obj: Any) -> bytes:
    return json.dumps(
        {"id": event_id, "type": "invoice.paid", "data": {"object": obj}}, indent=1
    ).encode()


def privacy_config(db_url: str, target: str, source: dict[str, Any] | None = None) -> Config:
    routes = [
        {"events": ["*"], "action": "relay", "forward": target},
        RECORD,
    ]
    return make_config(db_url, routes=routes, source=source or {})


async def database_bytes(db_url: str) -> bytes:
    """Everything the database holds for this test: SQLite's file and its WAL byte for
    byte; every row of every table of PostgreSQL's schema."""
    if db_url.startswith("sqlite:"):
        return await asyncio.to_thread(sqlite_file_bytes, db_url)
    return b"\n".join((await every_row(db_url)).values())


@pytest.mark.parametrize("redacting", [True, False], ids=["redacted", "not-redacted"])
async def test_a_redacted_canary_is_nowhere_in_the_database_the_forward_or_the_logs(
    db_url: str, client: httpx.AsyncClient, redacting: bool
) -> None:
    canary = f"canary-{uuid.uuid4().hex}@example.com"
    source = {"redact": ["/data/object/customer_email"]} if redacting else {}
    body, headers = signed(
        body_with("evt_canary", customer_email=canary, amount=42), event_id="evt_canary"
    )
    with RecordingTarget() as target, structlog.testing.capture_logs() as lines:
        async with running_inbox(privacy_config(db_url, target.url, source)) as inbox:
            answer = await client.post(inbox.url(), content=body, headers=headers)
            assert answer.status_code == 200, answer.text
            await wait_for_status(inbox.store, "evt_canary", "completed")
        stored = await database_bytes(db_url)
    (request,) = target.requests
    forwarded = json.dumps(request["headers"]).encode() + request["body"]
    logged = json.dumps(lines, default=str).encode()
    if redacting:
        assert canary.encode() not in stored
        assert canary.encode() not in forwarded
        assert canary not in str(handlers.PAYLOADS)
        assert canary.encode() not in logged
        assert handlers.PAYLOADS["evt_canary"]["data"]["object"]["customer_email"] == MARKER
    else:
        assert canary.encode() in stored, "the search must find an unredacted canary"
        assert canary.encode() in forwarded
        assert canary in str(handlers.PAYLOADS)


async def test_the_forward_of_a_redacted_body_is_marked_and_carries_no_signature(
    db_url: str, client: httpx.AsyncClient
) -> None:
    source = {"redact": ["/data/object/metadata/*", "/data/object/lines/*/email"]}
    body, headers = signed(
        body_with(
            "evt_marked",
            metadata={"phone": "555-0100", "note": "call after 5"},
            lines=[{"email": "a@example.com", "qty": 1}, {"email": "b@example.com", "qty": 2}],
            amount=7,
        ),
        event_id="evt_marked",
    )
    with RecordingTarget() as target:
        async with running_inbox(privacy_config(db_url, target.url, source)) as inbox:
            answer = await client.post(inbox.url(), content=body, headers=headers)
            await wait_for_status(inbox.store, "evt_marked", "completed")
            found = await inbox.store.journal.get_delivery("evt_marked")
    assert answer.status_code == 200 and found is not None
    (request,) = target.requests
    sent = request["headers"]
    assert sent["x-hookinbox-redacted"] == "true"
    assert "webhook-signature" not in sent
    assert sent["webhook-id"] == "evt_marked"  # the rest of the provider's headers stay
    forwarded = orjson.loads(request["body"])
    assert forwarded["data"]["object"] == {
        "metadata": {"phone": MARKER, "note": MARKER},
        "lines": [{"email": MARKER, "qty": 1}, {"email": MARKER, "qty": 2}],
        "amount": 7,
    }
    # The journal's hash is the original bytes': duplicates and conflicts are unchanged.
    assert found.body_sha256 == hashlib.sha256(body).hexdigest()
    assert handlers.PAYLOADS["evt_marked"] == forwarded
    assert handlers.HEADERS["evt_marked"]["x-hookinbox-redacted"] == "true"


async def test_a_body_no_rule_touches_is_stored_and_forwarded_as_it_came(
    db_url: str, client: httpx.AsyncClient
) -> None:
    source = {"redact": ["/data/object/customer_email"]}
    body, headers = signed(body_with("evt_untouched", amount=1), event_id="evt_untouched")
    with RecordingTarget() as target:
        async with running_inbox(privacy_config(db_url, target.url, source)) as inbox:
            await client.post(inbox.url(), content=body, headers=headers)
            await wait_for_status(inbox.store, "evt_untouched", "completed")
    (request,) = target.requests
    assert request["body"] == body
    assert request["headers"]["webhook-signature"] == headers["webhook-signature"]
    assert "x-hookinbox-redacted" not in request["headers"]


async def test_a_repeat_of_a_redacted_event_is_a_duplicate_and_a_changed_body_a_conflict(
    db_url: str, client: httpx.AsyncClient
) -> None:
    source = {"redact": ["/data/object/customer_email"]}
    first, headers = signed(body_with("evt_rep", customer_email="x@example.com"), event_id="e1")
    changed, changed_headers = signed(
        body_with("evt_rep", customer_email="y@example.com"), event_id="e1"
    )
    async with running_inbox(make_config(db_url, routes=[RECORD], source=source)) as inbox:
        one = await client.post(inbox.url(), content=first, headers=headers)
        again = await client.post(inbox.url(), content=first, headers=headers)
        other = await client.post(inbox.url(), content=changed, headers=changed_headers)
    assert one.json()["status"] == "accepted"
    assert again.json() == {"status": "duplicate", "delivery_id": one.json()["delivery_id"]}
    # The two bodies differ only in a redacted field: still a conflict, by the original hash.
    assert other.json()["conflict"] is True


async def test_hashed_fields_and_the_subject_are_keyed_hashes_that_join(
    db_url: str, client: httpx.AsyncClient
) -> None:
    source = {
        "redact": ["/data/object/customer"],
        "redact_hash": True,
        "subject": "/data/object/customer",
    }
    routes = [{**RECORD, "redact": ["/data/object/email"]}]  # a route's marker on top
    body, headers = signed(
        body_with("evt_hash", customer="cus_123", email="c@example.com"), event_id="evt_hash"
    )
    config = make_config(db_url, routes=routes, source=source)
    async with running_inbox(config) as inbox:
        await client.post(inbox.url(), content=body, headers=headers)
        await wait_for_status(inbox.store, "evt_hash", "completed")
        found = await inbox.store.erasure.find_subject(keyed_hash(HASH_KEY.encode(), "cus_123"))
    seen = handlers.PAYLOADS["evt_hash"]["data"]["object"]
    # HMAC-SHA256 under the key, in hex: the same value the subject column holds.
    expected = hmac.new(HASH_KEY.encode(), b"cus_123", hashlib.sha256).hexdigest()
    assert seen == {"customer": expected, "email": MARKER}
    assert found.deliveries == 1 and found.payloads == 1


async def test_a_route_rule_applies_only_to_the_deliveries_that_route_takes(
    db_url: str, client: httpx.AsyncClient
) -> None:
    routes = [{**RECORD, "events": ["invoice.*"], "redact": ["/data/object/email"]}]
    config = make_config(db_url, routes=routes)
    invoice, invoice_headers = signed(
        body_with("evt_inv", email="i@example.com"), event_id="evt_inv"
    )
    other = json.dumps({"id": "evt_other", "type": "order.paid", "data": {"email": "o@x"}})
    other_body, other_headers = signed(other.encode())
    async with running_inbox(config) as inbox:
        await client.post(inbox.url(), content=invoice, headers=invoice_headers)
        await client.post(inbox.url(), content=other_body, headers=other_headers)
        await wait_for_status(inbox.store, "evt_inv", "completed")

        async def stored_other() -> bool:
            return await inbox.store.journal.get_delivery(other_headers["webhook-id"]) is not None

        await wait_for(stored_other, 10, "the order delivery")
        found = await inbox.store.journal.get_delivery(other_headers["webhook-id"])
        assert found is not None
        kept = await inbox.store.journal.read_payload(found.id)
    assert handlers.PAYLOADS["evt_inv"]["data"]["object"]["email"] == MARKER
    assert kept == other_body


def test_the_key_must_be_in_the_environment_when_a_source_hashes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from hookinbox.errors import ConfigError

    monkeypatch.delenv("HOOKINBOX_HASH_KEY")
    config = make_config(f"sqlite:///{tmp_path}/h.db", source={"subject": "/data/customer"})
    with pytest.raises(ConfigError, match="HOOKINBOX_HASH_KEY is not set"):
        config.require_secrets()
    monkeypatch.setenv("HOOKINBOX_HASH_KEY", "short")
    with pytest.raises(ConfigError, match="at least 32 bytes"):
        config.require_secrets()
    assert SECRET_ENV  # the source's own secret is set by the suite
