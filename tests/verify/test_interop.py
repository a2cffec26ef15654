"""Interop with the providers' own Python libraries, both directions, no network.

For each library: what it signs, hookinbox accepts; what ``hookinbox send --scheme X``
signs (the registry's signer), the library accepts; and a one-byte change, an expired
timestamp and a wrong secret are refused by both. The libraries read the real clock, so
these tests sign "now". OpenAI's library only verifies (OpenAI signs on its side), so
for it the first direction is proven with standardwebhooks, whose format OpenAI sends.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import openai
import pytest
import slack_sdk.signature
import standardwebhooks
import stripe
import svix.webhooks
from verify_helpers import MakeVerifier, make_signer

from hookinbox.errors import VerificationError

BODY = json.dumps({"id": "evt_1", "type": "invoice.paid", "data": {"n": 1}}).encode()
SLACK_BODY = json.dumps(
    {"type": "event_callback", "event_id": "Ev1", "event": {"type": "app_mention"}}
).encode()


def whsec() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


def one_byte_changed(body: bytes) -> bytes:
    middle = len(body) // 2
    return body[:middle] + bytes([body[middle] ^ 1]) + body[middle + 1 :]


# -- what each official library accepts, as a predicate --------------------------------


def standardwebhooks_accepts(secret: str) -> Callable[[bytes, Mapping[str, str]], bool]:
    def accepts(body: bytes, headers: Mapping[str, str]) -> bool:
        try:
            standardwebhooks.Webhook(secret).verify(body, dict(headers))
        except standardwebhooks.WebhookVerificationError:
            return False
        return True

    return accepts


def svix_accepts(secret: str) -> Callable[[bytes, Mapping[str, str]], bool]:
    def accepts(body: bytes, headers: Mapping[str, str]) -> bool:
        try:
            svix.webhooks.Webhook(secret).verify(body, dict(headers))
        except svix.webhooks.WebhookVerificationError:
            return False
        return True

    return accepts


def openai_accepts(secret: str) -> Callable[[bytes, Mapping[str, str]], bool]:
    client = openai.OpenAI(api_key="unused", max_retries=0)

    def accepts(body: bytes, headers: Mapping[str, str]) -> bool:
        try:
            client.webhooks.unwrap(body, dict(headers), secret=secret)
        except openai.InvalidWebhookSignatureError:
            return False
        return True

    return accepts


def stripe_accepts(secret: str) -> Callable[[bytes, Mapping[str, str]], bool]:
    def accepts(body: bytes, headers: Mapping[str, str]) -> bool:
        try:
            stripe.Webhook.construct_event(body, headers.get("stripe-signature"), secret)
        except stripe.SignatureVerificationError:
            return False
        return True

    return accepts


def slack_accepts(secret: str) -> Callable[[bytes, Mapping[str, str]], bool]:
    def accepts(body: bytes, headers: Mapping[str, str]) -> bool:
        verifier = slack_sdk.signature.SignatureVerifier(secret)
        return verifier.is_valid_request(body, dict(headers))

    return accepts


# -- what each official library signs ------------------------------------------------


def standardwebhooks_signs(secret: str, body: bytes, stamp: int) -> dict[str, str]:
    signature = standardwebhooks.Webhook(secret).sign(
        "msg_1", datetime.fromtimestamp(stamp, UTC), body.decode()
    )
    return {"webhook-id": "msg_1", "webhook-timestamp": str(stamp), "webhook-signature": signature}


def svix_signs(secret: str, body: bytes, stamp: int) -> dict[str, str]:
    signature = svix.webhooks.Webhook(secret).sign(
        "msg_1", datetime.fromtimestamp(stamp, UTC), body.decode()
    )
    return {"svix-id": "msg_1", "svix-timestamp": str(stamp), "svix-signature": signature}


def stripe_signs(secret: str, body: bytes, stamp: int) -> dict[str, str]:
    header = stripe.WebhookSignature.generate_signature_header(body.decode(), secret, stamp)
    return {"stripe-signature": header}


def slack_signs(secret: str, body: bytes, stamp: int) -> dict[str, str]:
    signature = slack_sdk.signature.SignatureVerifier(secret).generate_signature(
        timestamp=str(stamp), body=body
    )
    assert signature is not None
    return {"x-slack-request-timestamp": str(stamp), "x-slack-signature": signature}


Signs = Callable[[str, bytes, int], dict[str, str]]
Accepts = Callable[[str], Callable[[bytes, Mapping[str, str]], bool]]

# (scheme, new secret, library signer, library verifier, body)
LIBRARIES: dict[str, tuple[str, Callable[[], str], Signs | None, Accepts, bytes]] = {
    "standardwebhooks": (
        "standard-webhooks",
        whsec,
        standardwebhooks_signs,
        standardwebhooks_accepts,
        BODY,
    ),
    "svix": ("standard-webhooks", whsec, svix_signs, svix_accepts, BODY),
    "openai": ("standard-webhooks", whsec, None, openai_accepts, BODY),
    "stripe": ("stripe", whsec, stripe_signs, stripe_accepts, BODY),
    "slack_sdk": ("slack", lambda: os.urandom(16).hex(), slack_signs, slack_accepts, SLACK_BODY),
}
SIGNING = [name for name, lib in LIBRARIES.items() if lib[2] is not None]


def _ours_accepts(verifier: object, body: bytes, headers: Mapping[str, str], now: float) -> bool:
    try:
        verifier.verify(body, headers, now=now)  # type: ignore[attr-defined]
    except VerificationError:
        return False
    return True


# -- library signs, hookinbox verifies ------------------------------------------------


@pytest.mark.parametrize("library", SIGNING)
def test_hookinbox_accepts_what_the_library_signs(
    make_verifier: MakeVerifier, library: str
) -> None:
    scheme, new_secret, signs, _, body = LIBRARIES[library]
    assert signs is not None
    secret, now = new_secret(), int(time.time())
    event = make_verifier(scheme, [secret]).verify(body, signs(secret, body, now), now=now)
    assert event.payload == json.loads(body)


@pytest.mark.parametrize("library", SIGNING)
def test_hookinbox_refuses_a_library_delivery_with_one_byte_changed(
    make_verifier: MakeVerifier, library: str
) -> None:
    scheme, new_secret, signs, _, body = LIBRARIES[library]
    assert signs is not None
    secret, now = new_secret(), int(time.time())
    verifier = make_verifier(scheme, [secret])
    assert not _ours_accepts(verifier, one_byte_changed(body), signs(secret, body, now), now)


@pytest.mark.parametrize("library", SIGNING)
def test_hookinbox_refuses_an_expired_library_delivery(
    make_verifier: MakeVerifier, library: str
) -> None:
    scheme, new_secret, signs, _, body = LIBRARIES[library]
    assert signs is not None
    secret, now = new_secret(), int(time.time())
    verifier = make_verifier(scheme, [secret])
    assert not _ours_accepts(verifier, body, signs(secret, body, now - 600), now)


@pytest.mark.parametrize("library", SIGNING)
def test_hookinbox_refuses_a_library_delivery_under_another_secret(
    make_verifier: MakeVerifier, library: str
) -> None:
    scheme, new_secret, signs, _, body = LIBRARIES[library]
    assert signs is not None
    now = int(time.time())
    verifier = make_verifier(scheme, [new_secret()])
    assert not _ours_accepts(verifier, body, signs(new_secret(), body, now), now)


# -- hookinbox signs (hookinbox send --scheme X), the library verifies ----------------


def _our_delivery(scheme: str, secret: str, body: bytes, stamp: int) -> dict[str, str]:
    return make_signer(scheme, secret).sign(body, event_id="msg_1", event_type="t", timestamp=stamp)


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_the_library_accepts_what_hookinbox_signs(library: str) -> None:
    scheme, new_secret, _, accepts, body = LIBRARIES[library]
    secret = new_secret()
    assert accepts(secret)(body, _our_delivery(scheme, secret, body, int(time.time())))


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_the_library_refuses_a_hookinbox_delivery_with_one_byte_changed(library: str) -> None:
    scheme, new_secret, _, accepts, body = LIBRARIES[library]
    secret = new_secret()
    headers = _our_delivery(scheme, secret, body, int(time.time()))
    assert not accepts(secret)(one_byte_changed(body), headers)


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_the_library_refuses_an_expired_hookinbox_delivery(library: str) -> None:
    scheme, new_secret, _, accepts, body = LIBRARIES[library]
    secret = new_secret()
    assert not accepts(secret)(body, _our_delivery(scheme, secret, body, int(time.time()) - 600))


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_the_library_refuses_a_hookinbox_delivery_under_another_secret(library: str) -> None:
    scheme, new_secret, _, accepts, body = LIBRARIES[library]
    headers = _our_delivery(scheme, new_secret(), body, int(time.time()))
    assert not accepts(new_secret())(body, headers)


# -- the same three refusals, hookinbox side, with the exact codes --------------------


@pytest.mark.parametrize("library", SIGNING)
def test_refusal_codes_match_the_built_in_contract(
    make_verifier: MakeVerifier, library: str
) -> None:
    scheme, new_secret, signs, _, body = LIBRARIES[library]
    assert signs is not None
    secret, now = new_secret(), int(time.time())
    verifier = make_verifier(scheme, [secret])
    cases = {
        "invalid_signature": (one_byte_changed(body), signs(secret, body, now)),
        "timestamp_out_of_tolerance": (body, signs(secret, body, now - 600)),
    }
    for code, (sent, headers) in cases.items():
        with pytest.raises(VerificationError) as caught:
            verifier.verify(sent, headers, now=now)
        assert caught.value.code == code
    with pytest.raises(VerificationError) as caught:
        make_verifier(scheme, [new_secret()]).verify(body, signs(secret, body, now), now=now)
    assert caught.value.code == "invalid_signature"
