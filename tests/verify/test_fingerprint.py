"""Contract of fingerprint ids: one policy, one test each."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from verify_helpers import MakeVerifier, make_signer

from hookinbox.config import config_from_mapping
from hookinbox.config.schemes import FingerprintPolicy
from hookinbox.errors import ConfigError, MissingEventId
from hookinbox.verify.fingerprint import fingerprint_of

TASK = {"task_id": "t_1", "status": "ready", "meta": {"b": 2, "a": 1}, "prompt": "draw a cat"}


def policy(*fields: str, headers: tuple[str, ...] = ()) -> FingerprintPolicy:
    return FingerprintPolicy(fields=fields, headers=headers)


def config_with(source: dict[str, Any]) -> None:
    config_from_mapping({"sources": {"video": {"secret_env": "VIDEO_SECRET", **source}}})


def test_id_is_fp_and_sha256_of_the_canonical_values_in_order() -> None:
    expected = hashlib.sha256(json.dumps(["t_1", "ready"]).replace(", ", ",").encode())
    assert fingerprint_of(policy("/task_id", "/status"), TASK, {}) == "fp:" + expected.hexdigest()


def test_same_fields_same_id_whatever_else_changes() -> None:
    other = {**TASK, "meta": {"a": 1, "b": 2}, "extra": True}
    assert fingerprint_of(policy("/task_id", "/status"), TASK, {}) == fingerprint_of(
        policy("/task_id", "/status"), other, {}
    )


def test_a_different_field_value_gives_a_different_id() -> None:
    failed = {**TASK, "status": "failed"}
    assert fingerprint_of(policy("/task_id", "/status"), TASK, {}) != fingerprint_of(
        policy("/task_id", "/status"), failed, {}
    )


def test_object_values_are_canonical_so_key_order_does_not_matter() -> None:
    reordered = {**TASK, "meta": {"a": 1, "b": 2}}
    assert fingerprint_of(policy("/meta"), TASK, {}) == fingerprint_of(
        policy("/meta"), reordered, {}
    )


def test_values_cannot_run_together() -> None:
    assert fingerprint_of(policy("/a", "/b"), {"a": "x", "b": "yz"}, {}) != fingerprint_of(
        policy("/a", "/b"), {"a": "xy", "b": "z"}, {}
    )


def test_headers_take_part_after_the_fields() -> None:
    with_header = policy("/task_id", headers=("x-task-attempt",))
    assert fingerprint_of(with_header, TASK, {"x-task-attempt": "1"}) != fingerprint_of(
        with_header, TASK, {"x-task-attempt": "2"}
    )


def test_a_missing_field_is_missing_event_id_naming_the_pointer_not_the_payload() -> None:
    with pytest.raises(MissingEventId) as caught:
        fingerprint_of(policy("/task_id", "/finished_at"), TASK, {})
    assert "/finished_at" in caught.value.message
    assert "t_1" not in caught.value.message


def test_the_provider_id_wins_over_the_fingerprint(make_verifier: MakeVerifier) -> None:
    body = json.dumps({"id": "evt_1", "type": "x"}).encode()
    headers = make_signer("stripe", "whsec_x").sign(body, event_id="", event_type="", timestamp=5)
    verifier = make_verifier("stripe", ["whsec_x"], fingerprint={"fields": ["/type"]})
    assert verifier.verify(body, headers, now=5).event_id == "evt_1"


def test_no_provider_id_uses_the_fingerprint(make_verifier: MakeVerifier) -> None:
    body = json.dumps({"task_id": "t_1", "status": "ready"}).encode()
    headers = make_signer("github", "s").sign(body, event_id="", event_type="video", timestamp=0)
    verifier = make_verifier("github", ["s"], fingerprint={"fields": ["/task_id", "/status"]})
    assert verifier.verify(body, headers, now=0).event_id.startswith("fp:")


def test_no_provider_id_and_no_policy_is_missing_event_id(make_verifier: MakeVerifier) -> None:
    body = json.dumps({"task_id": "t_1"}).encode()
    headers = make_signer("github", "s").sign(body, event_id="", event_type="video", timestamp=0)
    with pytest.raises(MissingEventId):
        make_verifier("github", ["s"]).verify(body, headers, now=0)


# -- what a config may not name --------------------------------------------------------


@pytest.mark.parametrize("header", ["Authorization", "proxy-authorization", "Cookie"])
def test_a_credential_header_is_refused(header: str) -> None:
    with pytest.raises(ConfigError, match=r"^sources\.video\.fingerprint: header"):
        config_with({"fingerprint": {"headers": [header]}})


@pytest.mark.parametrize("header", ["webhook-signature", "x-hub-signature-256", "stripe-signature"])
def test_a_signature_header_is_refused(header: str) -> None:
    with pytest.raises(ConfigError, match=r"^sources\.video\.fingerprint:"):
        config_with({"fingerprint": {"headers": [header]}})


@pytest.mark.parametrize(
    ("field", "forbidden"),
    [
        ("/input/text", "/input/text"),  # named exactly
        ("/input/text", "/input"),  # inside a forbidden object
        ("/input", "/input/text"),  # an object that contains a forbidden field
    ],
)
def test_a_field_listed_in_fingerprint_forbidden_is_refused(field: str, forbidden: str) -> None:
    with pytest.raises(ConfigError, match="fingerprint_forbidden"):
        config_with({"fingerprint_forbidden": [forbidden], "fingerprint": {"fields": [field]}})


def test_a_header_listed_in_fingerprint_forbidden_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^sources\.video\.fingerprint: header 'x-api-key'"):
        config_with(
            {"fingerprint_forbidden": ["X-Api-Key"], "fingerprint": {"headers": ["x-api-key"]}}
        )


@pytest.mark.parametrize(
    "field",
    [
        "/prompt",
        "/input/Prompt",
        "/client_secret",
        "/auth/token",
        "/api-key",
        "/output_url",
        "/result/downloadUrl",
        "/url",
    ],
)
def test_prompts_secrets_and_urls_are_refused_by_name(field: str) -> None:
    with pytest.raises(ConfigError, match="prompt, a secret or a temporary URL"):
        config_with({"fingerprint": {"fields": [field]}})


def test_a_sibling_of_a_forbidden_field_is_allowed() -> None:
    config_with(
        {"fingerprint_forbidden": ["/input/text"], "fingerprint": {"fields": ["/input_id"]}}
    )


@pytest.mark.parametrize(
    ("fingerprint", "message"),
    [
        ({}, "at least one field or header"),
        ({"fields": ["task_id"]}, "not a JSON pointer"),
        ({"fields": ["/a", "/a"]}, "each field or header once"),
        ({"headers": ["bad header"]}, "not an HTTP header name"),
    ],
)
def test_a_malformed_policy_is_refused_naming_the_key(
    fingerprint: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=r"^sources\.video\.fingerprint") as caught:
        config_with({"fingerprint": fingerprint})
    assert message in caught.value.message
