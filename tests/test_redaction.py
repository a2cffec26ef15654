"""The redaction rules on their own (pointers, globs, markers and hashes, which wins) and
the config's checks of them: every bad rule is one line naming its key, at load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hookinbox.config import config_from_mapping
from hookinbox.errors import ConfigError
from hookinbox.payload import parse_json_object
from hookinbox.redaction import MARKER, Redaction, keyed_hash, payload_bytes, without_signatures

KEY = b"k" * 32


def redact(payload: dict[str, Any], *rules: tuple[str, bool]) -> dict[str, Any] | None:
    return Redaction(rules, KEY).apply(payload)


def test_pointers_globs_and_array_items_are_replaced_and_the_original_is_left_alone() -> None:
    payload = {
        "a": {"email": "x@example.com", "keep": 1},
        "meta": {"phone": "1", "card_last4": "4242", "card_brand": "visa"},
        "items": [{"email": "i@x"}, {"email": "j@x"}, {"name": "no email"}],
        "we/ird": {"~k": "v"},
    }
    before = json.dumps(payload)
    found = redact(
        payload,
        ("/a/email", False),
        ("/meta/card_*", False),
        ("/items/*/email", False),
        ("/we~1ird/~0k", False),
        ("/absent/field", False),
    )
    assert found == {
        "a": {"email": MARKER, "keep": 1},
        "meta": {"phone": "1", "card_last4": MARKER, "card_brand": MARKER},
        "items": [{"email": MARKER}, {"email": MARKER}, {"name": "no email"}],
        "we/ird": {"~k": MARKER},
    }
    assert json.dumps(payload) == before  # a copy: the verified payload is unchanged


def test_nothing_to_redact_is_none_and_a_marker_beats_a_hash_of_the_same_field() -> None:
    assert redact({"a": 1}, ("/b", False), ("/a/b", True)) is None
    payload = {"c": "cus_1", "d": {"n": 2}}
    both = redact(payload, ("/c", True), ("/c", False), ("/d", True))
    assert both == {"c": MARKER, "d": keyed_hash(KEY, {"n": 2})}
    hashed = redact(payload, ("/c", True), ("/*", True))  # listed twice: hashed once
    assert hashed is not None and hashed["c"] == keyed_hash(KEY, "cus_1")


def test_a_keyed_hash_reads_an_integer_as_its_digits_and_depends_on_the_key() -> None:
    assert keyed_hash(KEY, 42) == keyed_hash(KEY, "42")
    assert keyed_hash(KEY, "cus_1") != keyed_hash(b"j" * 32, "cus_1")
    assert len(keyed_hash(KEY, "cus_1")) == 64
    with pytest.raises(ValueError, match="needs a key"):
        Redaction([("/a", True)], None)


def test_a_redacted_body_keeps_an_integer_past_64_bits_exact() -> None:
    payload = parse_json_object(b'{"big": 123456789012345678901234567890, "e": "x"}')
    found = redact(payload, ("/e", False))
    assert found is not None
    assert payload_bytes(found) == b'{"big":123456789012345678901234567890,"e":"[redacted]"}'


def test_the_headers_of_a_redacted_delivery_lose_every_signature() -> None:
    kept = {
        "content-type": "application/json",
        "webhook-id": "msg_1",
        "webhook-signature": "v1,abc",
        "stripe-signature": "t=1,v1=x",
        "x-shopify-hmac-sha256": "x",
        "x-acme-sig": "x",
    }
    assert without_signatures(kept, frozenset({"x-acme-sig"})) == {
        "content-type": "application/json",
        "webhook-id": "msg_1",
        "x-hookinbox-redacted": "true",
    }


def source_config(tmp_path: Path, **source: Any) -> Any:
    data = {
        "database": f"sqlite:///{tmp_path}/x.db",
        "sources": {"s": {"scheme": "standard-webhooks", "secret_env": "S", **source}},
    }
    return config_from_mapping(data)


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ({"redact": ["data/email"]}, "sources.s.redact: 'data/email' is not a JSON pointer"),
        ({"redact": ["/a/~2"]}, "'~' must be written ~0"),
        ({"redact": ["/a/**"]}, "'**' is not a glob here"),
        ({"redact": ["/a"] * 65}, "at most 64 redaction pointers"),
        ({"subject": "customer"}, "sources.s.subject: 'customer' is not a JSON pointer"),
        (
            {
                "scheme": "hmac",
                "body": "form",
                "redact": ["/From"],
                "hmac": {"header": "x-s", "id_header": "x-id"},
            },
            "redact applies to JSON bodies only",
        ),
        (
            {"routes": [{"action": "a", "handler": "m:f", "redact": ["nope"]}]},
            "sources.s.routes.0.redact: 'nope' is not a JSON pointer",
        ),
    ],
)
def test_a_bad_redaction_or_subject_is_one_line_at_load(
    tmp_path: Path, source: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        source_config(tmp_path, **source)
    assert says in refused.value.message
    assert "\n" not in refused.value.message


def test_the_key_is_needed_only_by_a_source_that_hashes(tmp_path: Path) -> None:
    assert not source_config(tmp_path, redact=["/a"]).needs_hash_key
    assert source_config(tmp_path, redact=["/a"], redact_hash=True).needs_hash_key
    assert source_config(tmp_path, subject="/data/customer").needs_hash_key
    routes = [{"action": "a", "handler": "m:f", "redact": ["/x"], "redact_hash": True}]
    assert source_config(tmp_path, routes=routes).needs_hash_key
    named = config_from_mapping(
        {"privacy": {"hash_key_env": "MY_KEY"}, "database": f"sqlite:///{tmp_path}/y.db"}
    )
    with pytest.raises(ConfigError, match="environment variable MY_KEY is not set"):
        named.privacy.hash_key({})
    assert named.privacy.hash_key({"MY_KEY": "z" * 32}) == b"z" * 32
