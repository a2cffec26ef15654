"""``scheme = "sdk"``: the official helpers decide, with the built-in schemes' error codes."""

from __future__ import annotations

import base64
import json
import os
import time

import pytest
from verify_helpers import MakeVerifier, make_signer

from hookinbox.errors import VerificationError

BODY = json.dumps({"id": "evt_9", "type": "response.completed", "data": {"n": 1}}).encode()
PROVIDERS = ["openai", "standardwebhooks", "svix", "stripe"]


def whsec() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


def scheme_of(provider: str) -> str:
    return "stripe" if provider == "stripe" else "standard-webhooks"


def sent(provider: str, secret: str, stamp: int) -> dict[str, str]:
    return make_signer(scheme_of(provider), secret).sign(
        BODY, event_id="msg_9", event_type="", timestamp=stamp
    )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_accepts_a_good_delivery_with_the_built_in_ids(
    make_verifier: MakeVerifier, provider: str
) -> None:
    secret, now = whsec(), int(time.time())
    verifier = make_verifier("sdk", [whsec(), secret], sdk={"provider": provider})
    event = verifier.verify(BODY, sent(provider, secret, now), now=now)
    assert event.event_id == ("evt_9" if provider == "stripe" else "msg_9")
    assert event.event_type == "response.completed"


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    "broken", ["missing_headers", "timestamp_out_of_tolerance", "invalid_signature", "wrong_secret"]
)
def test_refusals_have_the_built_in_codes(
    make_verifier: MakeVerifier, provider: str, broken: str
) -> None:
    secret, now = whsec(), int(time.time())
    headers = sent(provider, secret, now - 600 if broken == "timestamp_out_of_tolerance" else now)
    body = BODY
    if broken == "missing_headers":
        headers = {}
    if broken == "invalid_signature":
        body = BODY.replace(b'"n": 1', b'"n": 2')
    verifier = make_verifier(
        "sdk", [whsec() if broken == "wrong_secret" else secret], sdk={"provider": provider}
    )
    with pytest.raises(VerificationError) as caught:
        verifier.verify(body, headers, now=now)
    expected = "invalid_signature" if broken == "wrong_secret" else broken
    assert caught.value.code == expected


@pytest.mark.parametrize("provider", ["openai", "standardwebhooks", "svix"])
def test_a_missing_id_header_is_missing_event_id_as_built_in(
    make_verifier: MakeVerifier, provider: str
) -> None:
    secret, now = whsec(), int(time.time())
    headers = sent(provider, secret, now)
    del headers["webhook-id"]
    verifier = make_verifier("sdk", [secret], sdk={"provider": provider})
    with pytest.raises(VerificationError) as caught:
        verifier.verify(BODY, headers, now=now)
    assert caught.value.code == "missing_event_id"
