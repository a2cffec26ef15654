"""Asymmetric Standard Webhooks: ``v1a`` ed25519 signatures, ``whpk_`` / ``whsk_`` keys."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from verify_helpers import MakeVerifier, make_signer

from hookinbox.errors import ConfigError, VerificationError
from hookinbox.verify.standard_webhooks import public_key_of

BODY = json.dumps({"type": "video.completed", "data": {"id": "video_1"}}).encode()
NOW = 1_700_000_000


def whsk(seed_and_public: bool = False) -> str:
    key = Ed25519PrivateKey.generate()
    raw = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    if seed_and_public:  # the libsodium form: 32-byte seed + 32-byte public key
        raw += base64.b64decode(public_key_of("whsk_" + base64.b64encode(raw).decode())[5:])
    return "whsk_" + base64.b64encode(raw).decode()


def signed(secret_key: str, body: bytes = BODY, stamp: int = NOW) -> dict[str, str]:
    return make_signer("standard-webhooks", secret_key).sign(
        body, event_id="msg_1", event_type="video.completed", timestamp=stamp
    )


def code_of(verifier: object, body: bytes, headers: dict[str, str], now: int = NOW) -> str:
    with pytest.raises(VerificationError) as caught:
        verifier.verify(body, headers, now=now)  # type: ignore[attr-defined]
    return caught.value.code


def test_signer_with_a_secret_key_sends_v1a() -> None:
    assert signed(whsk())["webhook-signature"].startswith("v1a,")


@pytest.mark.parametrize("libsodium_form", [False, True])
def test_public_key_accepts_what_its_secret_key_signs(
    make_verifier: MakeVerifier, libsodium_form: bool
) -> None:
    secret_key = whsk(libsodium_form)
    event = make_verifier("standard-webhooks", [public_key_of(secret_key)]).verify(
        BODY, signed(secret_key), now=NOW
    )
    assert (event.event_id, event.event_type) == ("msg_1", "video.completed")


def test_one_byte_changed_is_refused(make_verifier: MakeVerifier) -> None:
    secret_key = whsk()
    verifier = make_verifier("standard-webhooks", [public_key_of(secret_key)])
    assert code_of(verifier, BODY.replace(b"video_1", b"video_2"), signed(secret_key)) == (
        "invalid_signature"
    )


def test_another_key_pair_is_refused(make_verifier: MakeVerifier) -> None:
    verifier = make_verifier("standard-webhooks", [public_key_of(whsk())])
    assert code_of(verifier, BODY, signed(whsk())) == "invalid_signature"


def test_expired_is_refused(make_verifier: MakeVerifier) -> None:
    secret_key = whsk()
    verifier = make_verifier("standard-webhooks", [public_key_of(secret_key)])
    assert code_of(verifier, BODY, signed(secret_key, stamp=NOW - 301)) == (
        "timestamp_out_of_tolerance"
    )


def test_v1a_signature_presented_as_v1_is_refused(make_verifier: MakeVerifier) -> None:
    secret_key = whsk()
    headers = signed(secret_key)
    headers["webhook-signature"] = headers["webhook-signature"].replace("v1a,", "v1,")
    verifier = make_verifier("standard-webhooks", [public_key_of(secret_key)])
    assert code_of(verifier, BODY, headers) == "invalid_signature"


def test_mixed_keys_during_migration_from_v1_to_v1a(make_verifier: MakeVerifier) -> None:
    secret_key, symmetric = whsk(), "whsec_" + base64.b64encode(b"k" * 24).decode()
    verifier = make_verifier("standard-webhooks", [symmetric, public_key_of(secret_key)])
    both = signed(secret_key)["webhook-signature"] + " " + signed(symmetric)["webhook-signature"]
    for signature in (signed(secret_key)["webhook-signature"], both):
        headers = {**signed(secret_key), "webhook-signature": signature}
        assert verifier.verify(BODY, headers, now=NOW).event_id == "msg_1"
    assert verifier.verify(BODY, signed(symmetric), now=NOW).event_id == "msg_1"


def test_a_public_key_cannot_sign() -> None:
    with pytest.raises(ConfigError, match="secret_env"):
        make_signer("standard-webhooks", public_key_of(whsk()))


@pytest.mark.parametrize(
    "key", ["whpk_" + base64.b64encode(b"short").decode(), "whpk_not base64!", "whsec_!!"]
)
def test_a_malformed_key_is_a_config_error_that_does_not_echo_it(
    make_verifier: MakeVerifier, key: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        make_verifier("standard-webhooks", [key])
    assert key not in caught.value.message
