"""``scheme = "hmac"``: the generic shared-secret scheme and its options."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import pytest
from verify_helpers import MakeVerifier, make_signer

from hookinbox.config import config_from_mapping
from hookinbox.errors import ConfigError, VerificationError

BODY = json.dumps({"event": {"id": "e_1", "kind": "call.ended"}, "type": "call.ended"}).encode()
NOW = 1_700_000_000

# A provider that sends X-Sig: sha512=<base64 of HMAC over "{ts}:{body}">, X-Ts and X-Id.
OPTIONS: dict[str, Any] = {
    "header": "X-Sig",
    "algorithm": "sha512",
    "encoding": "base64",
    "prefix": "sha512=",
    "timestamp_header": "X-Ts",
    "signed_content": "{timestamp}:{body}",
    "id_header": "X-Id",
}


def by_hand(secret: str, content: bytes, algorithm: str = "sha512") -> str:
    return base64.b64encode(hmac.new(secret.encode(), content, algorithm).digest()).decode()


def headers(**override: str) -> dict[str, str]:
    sent = {
        "x-sig": "sha512=" + by_hand("s3", f"{NOW}:".encode() + BODY),
        "x-ts": str(NOW),
        "x-id": "e_1",
    }
    return {**sent, **override}


def code_of(make_verifier: MakeVerifier, sent: dict[str, str], body: bytes = BODY) -> str:
    with pytest.raises(VerificationError) as caught:
        make_verifier("hmac", ["s3"], hmac=OPTIONS).verify(body, sent, now=NOW)
    return caught.value.code


def test_a_signature_computed_by_hand_is_accepted(make_verifier: MakeVerifier) -> None:
    event = make_verifier("hmac", ["s3"], hmac=OPTIONS).verify(BODY, headers(), now=NOW)
    assert (event.event_id, event.event_type, event.timestamp) == ("e_1", "call.ended", NOW)


def test_our_signer_matches_the_hand_computed_headers() -> None:
    sent = make_signer("hmac", "s3", hmac=OPTIONS).sign(
        BODY, event_id="e_1", event_type="call.ended", timestamp=NOW
    )
    assert sent == headers()


def test_one_byte_changed(make_verifier: MakeVerifier) -> None:
    assert code_of(make_verifier, headers(), BODY.replace(b"e_1", b"e_2")) == "invalid_signature"


def test_timestamp_changed(make_verifier: MakeVerifier) -> None:
    assert code_of(make_verifier, headers(**{"x-ts": str(NOW + 1)})) == "invalid_signature"


def test_expired(make_verifier: MakeVerifier) -> None:
    stamp = NOW - 301
    sig = "sha512=" + by_hand("s3", f"{stamp}:".encode() + BODY)
    assert code_of(make_verifier, headers(**{"x-sig": sig, "x-ts": str(stamp)})) == (
        "timestamp_out_of_tolerance"
    )


def test_wrong_secret(make_verifier: MakeVerifier) -> None:
    sig = "sha512=" + by_hand("other", f"{NOW}:".encode() + BODY)
    assert code_of(make_verifier, headers(**{"x-sig": sig})) == "invalid_signature"


def test_missing_prefix(make_verifier: MakeVerifier) -> None:
    sig = headers()["x-sig"].removeprefix("sha512=")
    assert code_of(make_verifier, headers(**{"x-sig": sig})) == "invalid_signature"


def test_missing_timestamp_header(make_verifier: MakeVerifier) -> None:
    sent = headers()
    del sent["x-ts"]
    assert code_of(make_verifier, sent) == "missing_headers"


@pytest.mark.parametrize("algorithm", ["sha1", "sha256", "sha512"])
@pytest.mark.parametrize("encoding", ["hex", "base64"])
def test_every_algorithm_and_encoding_round_trips(
    make_verifier: MakeVerifier, algorithm: str, encoding: str
) -> None:
    options = {
        "header": "x-signature",
        "algorithm": algorithm,
        "encoding": encoding,
        "id_pointer": "/event/id",
    }
    sent = make_signer("hmac", "k", hmac=options).sign(
        BODY, event_id="", event_type="", timestamp=0
    )
    event = make_verifier("hmac", ["k"], hmac=options).verify(BODY, sent, now=NOW)
    assert event.event_id == "e_1"
    assert event.timestamp is None


def test_hex_case_and_several_offered_signatures(make_verifier: MakeVerifier) -> None:
    options = {"header": "x-signature", "id_pointer": "/event/id"}
    good = hmac.new(b"k", BODY, hashlib.sha256).hexdigest().upper()
    sent = {"x-signature": "00" * 32 + " " + good}
    assert make_verifier("hmac", ["k"], hmac=options).verify(BODY, sent, now=NOW).event_id == "e_1"


def test_type_from_a_header(make_verifier: MakeVerifier) -> None:
    options = {
        "header": "x-signature",
        "id_pointer": "/event/id",
        "type_header": "x-event",
        "type_pointer": None,
    }
    sent = make_signer("hmac", "k", hmac=options).sign(
        BODY, event_id="", event_type="t.1", timestamp=0
    )
    assert make_verifier("hmac", ["k"], hmac=options).verify(BODY, sent, now=0).event_type == "t.1"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"header": "x-s", "signed_content": "{timestamp}"}, "{body} exactly once"),
        (
            {"header": "x-s", "signed_content": "{timestamp}.{body}", "id_header": "x-id"},
            "timestamp_header is not set",
        ),
        ({"header": "x-s", "algorithm": "md5", "id_header": "x-id"}, "sha1"),
        ({"header": "x s", "id_header": "x-id"}, "not an HTTP header name"),
        ({"header": "x-s", "id_header": "x-id", "id_pointer": "/id"}, "not both"),
    ],
)
def test_bad_options_are_refused_naming_the_key(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=r"^sources\.acme\.hmac") as caught:
        config_from_mapping(
            {"sources": {"acme": {"secret_env": "ACME", "scheme": "hmac", "hmac": options}}}
        )
    assert message in caught.value.message
