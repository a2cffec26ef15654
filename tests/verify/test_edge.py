"""The edge (docs/edge.md): timestamps, ids, types and kept headers, each checked before
anything reaches the store; and the forward's header encoding, which carries any id or
type that passed. Each failure test breaks exactly one thing."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.signing import SECRET
from verify_helpers import MakeVerifier

from hookinbox.errors import (
    InvalidEventId,
    InvalidEventType,
    InvalidHeaders,
    TimestampOutOfTolerance,
)
from hookinbox.outbound import header_bytes, header_text
from hookinbox.verify.base import VerifiedEvent, check_timestamp
from hookinbox.verify.edge import (
    MAX_HEADER_VALUE_BYTES,
    MAX_KEPT_HEADERS,
    MAX_TEXT_BYTES,
    check_event,
    kept_headers,
    storable_text,
)

NOW = 1_700_000_000
WHSEC = SECRET

ODD_STAMPS = [
    "9" * 309,  # int() works, float(now - it) overflowed: the 500 of the finding
    "9" * 4300,
    "9" * 4301,  # past Python's int() digit limit
    "1" * 13,
    "\u00b2",  # a digit to str.isdigit(), not to int()
    "\u0661\u0667\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660",  # Arabic-Indic 1700000000
    "+1700000000",
    "-1700000000",
    "1_700_000_000",
    "1700000000.5",
    "",
]


@pytest.mark.parametrize("stamp", ODD_STAMPS, ids=lambda s: f"{s[:12]!r}x{len(s)}")
def test_a_timestamp_that_is_not_a_few_ascii_digits_is_out_of_tolerance(stamp: str) -> None:
    with pytest.raises(TimestampOutOfTolerance) as refused:
        check_timestamp(stamp, now=NOW, tolerance_seconds=300)
    assert refused.value.code == "timestamp_out_of_tolerance"


def test_a_timestamp_within_the_window_is_its_integer() -> None:
    assert check_timestamp(f" {NOW + 5} ", now=NOW, tolerance_seconds=300) == NOW + 5


def _headers_with_stamp(scheme: str, stamp: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A source of ``scheme`` and headers whose only fault is the timestamp ``stamp``."""
    if scheme in ("standard-webhooks", "sdk-standardwebhooks"):
        options = {"sdk": {"provider": "standardwebhooks"}} if scheme.startswith("sdk") else {}
        sent = {"webhook-id": "msg_1", "webhook-timestamp": stamp, "webhook-signature": "v1,x"}
        return options, sent
    if scheme in ("stripe", "sdk-stripe"):
        options = {"sdk": {"provider": "stripe"}} if scheme.startswith("sdk") else {}
        return options, {"stripe-signature": f"t={stamp},v1=00"}
    if scheme == "slack":
        return {}, {"x-slack-signature": "v0=00", "x-slack-request-timestamp": stamp}
    hmac_options = {"header": "x-sig", "timestamp_header": "x-ts", "id_header": "x-id"}
    return {"hmac": hmac_options}, {"x-sig": "00", "x-ts": stamp, "x-id": "e_1"}


@pytest.mark.parametrize(
    "scheme", ["standard-webhooks", "stripe", "slack", "hmac", "sdk-standardwebhooks", "sdk-stripe"]
)
@pytest.mark.parametrize("digits", [309, 4300, 5000])
def test_a_timestamp_of_thousands_of_digits_is_refused_by_every_scheme_that_checks_one(
    make_verifier: MakeVerifier, scheme: str, digits: int
) -> None:
    options, sent = _headers_with_stamp(scheme, "9" * digits)
    secret = "whsec_x" if "stripe" in scheme else WHSEC
    name = "sdk" if scheme.startswith("sdk") else scheme
    verifier = make_verifier(name, [secret], **options)
    with pytest.raises(TimestampOutOfTolerance):
        verifier.verify(b"{}", sent, now=NOW)


# -- ids and types ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    ["evt_1", "response.completed", "r\u00e9ponse.completed", "注文.作成", "\U0001f600", "a b"],
)
def test_printable_text_of_any_script_is_storable(text: str) -> None:
    assert storable_text(text)


def test_255_utf8_bytes_are_storable_and_256_are_not() -> None:
    assert storable_text("a" * MAX_TEXT_BYTES)
    assert not storable_text("a" * (MAX_TEXT_BYTES + 1))
    assert storable_text("\u00e9" * (MAX_TEXT_BYTES // 2))  # two bytes each: 254
    assert not storable_text("\u00e9" * (MAX_TEXT_BYTES // 2 + 1))  # 256 bytes, 128 characters


@pytest.mark.parametrize("control", ["\x00", "\n", "\r", "\t", "\x1b", "\x7f", "\x85", "\x9f"])
def test_a_control_character_is_not_storable(control: str) -> None:
    assert not storable_text(f"crm{control}lead")
    assert not storable_text(f"r\u00e9ponse{control}")  # on the non-ASCII path too


@pytest.mark.parametrize("surrogate", ["\ud800", "\udfff"])
def test_a_lone_surrogate_is_not_storable(surrogate: str) -> None:
    assert not storable_text(f"type{surrogate}")


def _event(event_id: str = "evt_1", event_type: str = "crm.lead.created") -> VerifiedEvent:
    return VerifiedEvent(event_id=event_id, event_type=event_type, payload={})


def test_an_event_with_storable_id_and_type_passes_and_an_empty_type_is_allowed() -> None:
    assert check_event(_event()) == _event()
    assert check_event(_event(event_type="")).event_type == ""


@pytest.mark.parametrize("event_id", ["x" * 3000, "evt\n1", "evt\x001", "evt\ud800"])
def test_an_unstorable_event_id_is_invalid_event_id(event_id: str) -> None:
    with pytest.raises(InvalidEventId) as refused:
        check_event(_event(event_id=event_id))
    assert (refused.value.code, refused.value.http_status) == ("invalid_event_id", 400)


@pytest.mark.parametrize("event_type", ["t" * 256, "crm.\r", "crm\x00", "\ud800", "a\nb"])
def test_an_unstorable_event_type_is_invalid_event_type(event_type: str) -> None:
    with pytest.raises(InvalidEventType) as refused:
        check_event(_event(event_type=event_type))
    assert (refused.value.code, refused.value.http_status) == ("invalid_event_type", 400)


# -- kept headers --------------------------------------------------------------------------
def test_only_the_content_type_and_provider_headers_are_kept() -> None:
    sent = {
        "content-type": "application/json",
        "webhook-id": "msg_1",
        "x-github-event": "push",
        "authorization": "Bearer x",
        "cookie": "a=b",
        "x-forwarded-for": "10.0.0.1",
    }
    assert kept_headers(sent) == {
        "content-type": "application/json",
        "webhook-id": "msg_1",
        "x-github-event": "push",
    }


def test_as_many_provider_headers_as_allowed_are_kept_and_one_more_is_refused() -> None:
    many = {f"x-github-extra-{n}": "v" for n in range(MAX_KEPT_HEADERS)}
    assert len(kept_headers(many)) == MAX_KEPT_HEADERS
    with pytest.raises(InvalidHeaders) as refused:
        kept_headers({**many, "x-github-one-more": "v"})
    assert refused.value.code == "invalid_headers"


def test_a_provider_header_value_longer_than_allowed_is_refused() -> None:
    assert kept_headers({"webhook-x": "v" * MAX_HEADER_VALUE_BYTES})
    with pytest.raises(InvalidHeaders):
        kept_headers({"webhook-x": "v" * (MAX_HEADER_VALUE_BYTES + 1)})


def test_provider_headers_larger_than_allowed_in_all_are_refused() -> None:
    each = {f"x-slack-h{n}": "v" * 1000 for n in range(17)}  # each fine, 17 KB in all
    with pytest.raises(InvalidHeaders):
        kept_headers(each)


def test_an_unkept_header_of_any_size_is_not_the_edges_business() -> None:
    assert kept_headers({"x-other": "v" * 100_000}) == {}


@pytest.mark.parametrize("control", ["\x00", "\n", "\r", "\x7f"])
def test_a_provider_header_with_a_control_character_is_refused(control: str) -> None:
    with pytest.raises(InvalidHeaders):
        kept_headers({"webhook-id": f"msg{control}1"})


def test_a_tab_and_latin1_bytes_in_a_provider_header_are_kept() -> None:
    assert kept_headers({"x-shopify-shop-name": "caf\u00e9\tbar"})


# -- forward headers -----------------------------------------------------------------------
@pytest.mark.parametrize("plain", ["response.completed", "orders/create", "evt_1:a-b~c"])
def test_a_plain_ascii_value_goes_on_unchanged(plain: str) -> None:
    assert header_text(plain) == plain


@pytest.mark.parametrize(
    ("text", "sent"),
    [
        ("r\u00e9ponse.completed", "r%C3%A9ponse.completed"),
        ("50%off", "50%25off"),
        ("order paid", "order%20paid"),
        ("a\tb", "a%09b"),
    ],
)
def test_other_text_is_percent_encoded_utf8(text: str, sent: str) -> None:
    assert header_text(text) == sent


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(st.characters(codec="utf-8"), max_size=80))
def test_every_storable_text_survives_a_header_and_unquote_exactly(text: str) -> None:
    sent = header_text(text)
    assert all(0x21 <= ord(c) <= 0x7E for c in sent)
    assert unquote(sent) == text


def test_a_received_header_goes_on_as_the_bytes_it_came_as() -> None:
    raw = "caf\u00e9".encode()  # UTF-8 on the wire, read as ISO-8859-1 on the way in
    assert header_bytes(raw.decode("latin-1")) == raw


def test_every_refusal_code_is_documented_in_the_edge_contract_and_the_readme() -> None:
    from pathlib import Path

    from hookinbox import errors

    def family(cls: type) -> list[type]:
        return [cls, *(sub for child in cls.__subclasses__() for sub in family(child))]

    repo = Path(__file__).resolve().parents[2]
    edge_doc = (repo / "docs" / "edge.md").read_text()
    readme = (repo / "README.md").read_text()
    codes = {cls.code for cls in family(errors.VerificationError) if cls.code != "error"}
    assert {"invalid_event_id", "invalid_event_type", "body_too_deep"} <= codes
    for code in sorted(codes):
        assert f"`{code}`" in edge_doc, code
        assert f"`{code}`" in readme, code
        assert code in (errors.__doc__ or ""), code
