"""The senders added in issue 13: twilio (against Twilio's own RequestValidator, both
directions), basic and api-key, the hmac scheme's ``pairs`` layout (Mux) and Zoom
handshake, and their config checks. The known-answer vectors are in test_vectors.py."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest
from twilio.request_validator import RequestValidator
from verify_helpers import MakeVerifier, load_vectors, make_signer

from hookinbox.config import config_from_mapping
from hookinbox.errors import ConfigError, VerificationError

FORM = "application/x-www-form-urlencoded"
URL = "https://hooks.example.com/webhooks/twilio"
TWILIO = {"twilio": {"url": URL, "id_pointer": "/MessageSid", "type_pointer": "/MessageStatus"}}
PARAMS = {
    "MessageSid": "SM0123456789abcdef0123456789abcdef",
    "MessageStatus": "delivered",
    "AccountSid": "AC0123456789abcdef0123456789abcdef",
    "To": "+15558675310",
    "Body": "",
}


def twilio_headers(signature: str, query: str = "") -> dict[str, str]:
    sent = {"x-twilio-signature": signature, "content-type": FORM}
    return {**sent, ":query": query} if query else sent


def test_what_twilios_request_validator_signs_is_accepted(make_verifier: MakeVerifier) -> None:
    query = "callId=42&tenant=acme"
    signature = RequestValidator("auth-token-1").compute_signature(f"{URL}?{query}", PARAMS)
    verifier = make_verifier("twilio", ["old-token", "auth-token-1"], **TWILIO)
    event = verifier.verify(urlencode(PARAMS).encode(), twilio_headers(signature, query), now=0)
    assert (event.event_id, event.event_type) == (PARAMS["MessageSid"], "delivered")
    assert event.payload == PARAMS  # the form's fields, the empty Body kept


def test_what_our_signer_signs_twilios_validator_accepts() -> None:
    body = urlencode(PARAMS).encode()
    sent = make_signer("twilio", "auth-token-1", **TWILIO).sign(
        body, event_id="SM1", event_type="delivered", timestamp=0
    )
    assert RequestValidator("auth-token-1").validate(URL, PARAMS, sent["x-twilio-signature"])
    assert not RequestValidator("other").validate(URL, PARAMS, sent["x-twilio-signature"])
    assert sent["content-type"] == FORM


def test_our_twilio_signer_reproduces_the_documented_signature() -> None:
    case = load_vectors("twilio")["cases"][0]
    options = {"twilio": {"url": "https://mycompany.com/myapp.php?foo=1&bar=2"}}
    # The documented URL has a query; a source's url does not, so sign with the full one.
    from hookinbox.verify.twilio import signature_of

    params = dict(parse_qsl(case["body"], keep_blank_values=True))
    assert (
        signature_of(b"12345", options["twilio"]["url"], params, "HMAC_SHA1")
        == (case["headers"]["x-twilio-signature"])
    )


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        ("token", "invalid_signature"),
        ("url", "invalid_signature"),
        ("param", "invalid_signature"),
        ("added_param", "invalid_signature"),
        ("no_header", "missing_headers"),
        ("not_a_form", "malformed_form"),
    ],
)
def test_each_fault_of_a_twilio_delivery_has_one_code(
    make_verifier: MakeVerifier, fault: str, code: str
) -> None:
    validator = RequestValidator("wrong" if fault == "token" else "auth-token-1")
    url = URL.replace("hooks.", "other.") if fault == "url" else URL
    params = dict(PARAMS)
    signature = validator.compute_signature(url, params)
    if fault == "param":
        params["To"] = "+15550000000"
    if fault == "added_param":
        params["Injected"] = "1"
    body = urlencode(params).encode() if fault != "not_a_form" else "é=1".encode()
    headers = twilio_headers(signature)
    if fault == "no_header":
        del headers["x-twilio-signature"]
    with pytest.raises(VerificationError) as caught:
        make_verifier("twilio", ["auth-token-1"], **TWILIO).verify(body, headers, now=0)
    assert caught.value.code == code


def test_rotation_accepts_every_configured_credential(make_verifier: MakeVerifier) -> None:
    body = json.dumps({"id": "evt_1", "type": "t"}).encode()
    for secret in ("k-old", "k-new"):
        sent = make_signer("api-key", secret, credentials={"id_pointer": "/id"}).sign(
            body, event_id="", event_type="", timestamp=0
        )
        assert sent == {"x-api-key": secret}
        verifier = make_verifier("api-key", ["k-old", "k-new"], credentials={"id_pointer": "/id"})
        assert verifier.verify(body, sent, now=0).event_id == "evt_1"
    sent = make_signer("basic", "u:p2", credentials={"id_pointer": "/id"}).sign(
        body, event_id="", event_type="", timestamp=0
    )
    verifier = make_verifier("basic", ["u:p1", "u:p2"], credentials={"id_pointer": "/id"})
    assert verifier.verify(body, sent, now=0).event_id == "evt_1"


def test_a_form_from_a_credential_sender_is_read_when_the_source_takes_forms(
    make_verifier: MakeVerifier,
) -> None:
    body = b"order=o_1&status=paid&status=shipped"
    verifier = make_verifier(
        "api-key",
        ["k1"],
        body="auto",
        credentials={"id_pointer": "/order", "type_pointer": "/kind"},
    )
    event = verifier.verify(body, {"x-api-key": "k1", "content-type": FORM}, now=0)
    assert event.payload == {"order": "o_1", "status": ["paid", "shipped"]}
    json_only = make_verifier("api-key", ["k1"], credentials={"id_pointer": "/order"})
    with pytest.raises(VerificationError) as caught:
        json_only.verify(body, {"x-api-key": "k1", "content-type": FORM}, now=0)
    assert caught.value.code == "malformed_json"


def test_the_pairs_layout_signs_and_verifies_like_mux() -> None:
    vectors = load_vectors("mux")
    source = vectors["source"]
    case = vectors["cases"][0]
    stamp = int(case["headers"]["mux-signature"].split(",")[0].removeprefix("t="))
    sent = make_signer("hmac", vectors["secrets"][0], hmac=source["hmac"]).sign(
        case["body"].encode(), event_id="", event_type="", timestamp=stamp
    )
    assert sent == case["headers"]


@pytest.mark.parametrize(
    ("header", "code"),
    [
        ("v1=" + "0" * 64, "missing_headers"),
        ("t=,v1=" + "0" * 64, "missing_headers"),
        ("t=1700000000", "invalid_signature"),
        ("t=1700000000,v2=" + "0" * 64, "invalid_signature"),
        ("t=17000000000000,v1=" + "0" * 64, "timestamp_out_of_tolerance"),
    ],
)
def test_each_fault_of_a_pairs_header_has_one_code(
    make_verifier: MakeVerifier, header: str, code: str
) -> None:
    vectors = load_vectors("mux")
    verifier = make_verifier("hmac", vectors["secrets"], hmac=vectors["source"]["hmac"])
    with pytest.raises(VerificationError) as caught:
        verifier.verify(b"{}", {"mux-signature": header}, now=1700000000)
    assert caught.value.code == code


def test_zoom_is_answered_with_the_secret_that_verified_the_request(
    make_verifier: MakeVerifier,
) -> None:
    vectors = load_vectors("zoom")
    case = next(c for c in vectors["cases"] if c.get("challenge_response"))
    options = {k: v for k, v in vectors["source"].items() if k != "scheme"}
    # The new secret first: the answer is still made with the one Zoom signed with.
    verifier = make_verifier("hmac", ["a-newer-token", *vectors["secrets"]], **options)
    event = verifier.verify(case["body"].encode(), case["headers"], now=case["now"])
    assert event.challenge_response == case["challenge_response"]


BAD_CONFIGS: list[tuple[dict[str, Any], str]] = [
    ({"scheme": "twilio"}, "sources.s.twilio: scheme = 'twilio' needs a [sources.NAME.twilio]"),
    (
        {"scheme": "twilio", "twilio": {"url": "https://x.example/hook?a=1", "id_pointer": "/a"}},
        "sources.s.twilio.url: Value error, url must be the http(s) URL",
    ),
    ({"scheme": "twilio", "twilio": {"url": URL}}, "sources.s.fingerprint: scheme 'twilio'"),
    (
        {"scheme": "basic", "credentials": {"header": "x-key", "id_pointer": "/id"}},
        "sources.s.credentials: scheme 'basic' reads the Authorization header",
    ),
    ({"scheme": "api-key"}, "sources.s.fingerprint: scheme 'api-key' without credentials"),
    ({"scheme": "stripe", "body": "form"}, "sources.s.body: scheme 'stripe' takes JSON bodies"),
    (
        {
            "scheme": "hmac",
            "hmac": {
                "header": "x",
                "id_pointer": "/id",
                "layout": "pairs",
                "timestamp_header": "x-ts",
            },
        },
        "sources.s.hmac: layout 'pairs' reads the timestamp from the header",
    ),
    (
        {"scheme": "stripe", "answer": {"json": {"ok": True}, "text": "ok"}},
        "sources.s.answer: an answer needs exactly one of 'json' or 'text'",
    ),
    (
        {"scheme": "stripe", "credentials": {"id_pointer": "/id"}},
        "sources.s.credentials: these options apply only to scheme = 'basic' or 'api-key'",
    ),
]


@pytest.mark.parametrize(("source", "message"), BAD_CONFIGS)
def test_a_bad_sender_config_is_refused_naming_its_key(
    source: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({"sources": {"s": {"secret_env": "S", **source}}})
    assert caught.value.message.replace("Value error, ", "").startswith(
        message.replace("Value error, ", "")
    )
