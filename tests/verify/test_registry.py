"""The registry: every scheme signs what it verifies; config errors name the key."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest
from verify_helpers import SECRET_ENV, source

from hookinbox.config import config_from_mapping
from hookinbox.config.schemes import SCHEME_NAMES
from hookinbox.errors import ConfigError, InvalidSignature
from hookinbox.verify.registry import SCHEMES, build_signer, build_verifier

BODY = json.dumps({"id": "evt_1", "type": "thing.done", "event_id": "Ev1"}).encode()
NOW = 1_700_000_000

#: A secret and the extra source options for each scheme.
EXAMPLES: dict[str, tuple[str, dict[str, Any]]] = {
    "standard-webhooks": ("whsec_" + "a2V5a2V5a2V5a2V5", {}),
    "stripe": ("whsec_plain", {}),
    "github": ("gh", {}),
    "shopify": ("shop", {}),
    "slack": ("slack", {}),
    "hmac": ("k", {"hmac": {"header": "x-sig", "id_pointer": "/id"}}),
    "sdk": ("whsec_" + "a2V5a2V5a2V5a2V5", {"sdk": {"provider": "standardwebhooks"}}),
    "basic": ("user:pass", {"credentials": {"id_pointer": "/id", "type_pointer": "/type"}}),
    "api-key": ("key", {"credentials": {"id_header": "x-event-id", "type_header": "x-type"}}),
    "twilio": (
        "token",
        {"twilio": {"url": "https://h.example/t", "id_pointer": "/id", "type_pointer": "/type"}},
    ),
}
#: Twilio posts forms.
FORM_BODY = b"id=evt_1&type=thing.done&Body="


def test_every_scheme_is_registered_and_has_an_example() -> None:
    assert set(SCHEMES) == set(SCHEME_NAMES) == set(EXAMPLES)


@pytest.mark.parametrize("scheme", sorted(EXAMPLES))
def test_what_send_signs_the_receiver_accepts(monkeypatch: pytest.MonkeyPatch, scheme: str) -> None:
    secret, options = EXAMPLES[scheme]
    # Two secrets, as during a rotation: the new one signs, both are configured.
    old = "whsec_b2xkb2xkb2xk" if scheme in ("standard-webhooks", "sdk") else "old-secret"
    old = "old:secret" if scheme == "basic" else old
    body = FORM_BODY if scheme == "twilio" else BODY
    monkeypatch.setenv(SECRET_ENV, f"{old} {secret}")
    configured = source(scheme, **options)
    now = NOW if scheme != "sdk" else int(time.time())
    headers = build_signer("src", configured, secret).sign(
        body, event_id="id_1", event_type="thing.done", timestamp=now
    )
    event = build_verifier("src", configured).verify(body, headers, now=now)
    assert event.event_id in ("id_1", "evt_1", "Ev1")
    assert event.event_type == "thing.done"


def test_slack_never_answers_a_challenge_before_the_signature_holds() -> None:
    challenge = json.dumps({"type": "url_verification", "challenge": "c"}).encode()
    headers = {"x-slack-signature": "v0=" + "0" * 64, "x-slack-request-timestamp": str(NOW)}
    with pytest.raises(InvalidSignature):
        SCHEMES["slack"].verifier(source("slack"), ["slack"]).verify(challenge, headers, now=NOW)


def config_error(source_table: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({"sources": {"acme": {"secret_env": "ACME", **source_table}}})
    return caught.value.message


def test_unknown_scheme_names_the_key() -> None:
    assert config_error({"scheme": "paypal"}).startswith("sources.acme.scheme: unknown scheme")


@pytest.mark.parametrize("table", ["hmac", "sdk"])
def test_a_scheme_without_its_table_names_the_key(table: str) -> None:
    assert config_error({"scheme": table}).startswith(f"sources.acme.{table}: ")


@pytest.mark.parametrize(
    ("table", "value"),
    [("hmac", {"header": "x"}), ("sdk", {"provider": "stripe"}), ("shopify", {})],
)
def test_options_for_another_scheme_are_refused(table: str, value: dict[str, Any]) -> None:
    message = config_error({"scheme": "github", table: value})
    assert message.startswith(f"sources.acme.{table}: these options apply only to")


def test_unknown_option_is_refused() -> None:
    assert config_error({"scheme": "shopify", "shopify": {"dedup": "event"}}).startswith(
        "sources.acme.shopify.dedup"
    )


def test_an_unknown_sdk_provider_is_refused() -> None:
    assert config_error({"scheme": "sdk", "sdk": {"provider": "paypal"}}).startswith(
        "sources.acme.sdk.provider"
    )


def test_a_bad_secret_names_the_variable_not_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "whsec_%%%notbase64%%%")
    with pytest.raises(ConfigError) as caught:
        build_verifier("acme", source("standard-webhooks"))
    assert caught.value.message.startswith(f"sources.acme.secret_env ({SECRET_ENV}): ")
    assert "notbase64" not in caught.value.message


def test_no_secret_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    with pytest.raises(ConfigError, match=rf"^sources\.acme\.secret_env \({SECRET_ENV}\)"):
        build_verifier("acme", source("github"))


def test_a_missing_sdk_library_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SECRET_ENV, "whsec_x")
    monkeypatch.setitem(sys.modules, "stripe", None)  # import stripe -> ImportError
    with pytest.raises(ConfigError) as caught:
        build_verifier("acme", source("sdk", sdk={"provider": "stripe"}))
    assert caught.value.message.startswith("sources.acme.sdk.provider: ")
    assert "hookinbox[stripe]" in caught.value.message


def test_send_with_a_scheme_that_needs_options_names_the_key() -> None:
    plain = source("github").model_copy(update={"scheme": "hmac"})
    with pytest.raises(ConfigError, match=r"^sources\.acme\.hmac: "):
        build_signer("acme", plain, "k")
