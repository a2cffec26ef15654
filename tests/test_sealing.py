"""The sealed format and the key ring, without a store: plaintext passes through, a value
opens only for its own row and with the key that sealed it, rotation re-wraps without
touching the body, and a malformed ring is one line naming the variable, never a key."""

from __future__ import annotations

import base64

import pytest

from hookinbox.config import config_from_mapping
from hookinbox.config.encryption import parse_key_ring
from hookinbox.errors import ConfigError, KeyUnavailable
from hookinbox.sealing import (
    MAGIC,
    PLAINTEXT,
    TEXT_PREFIX,
    Sealer,
    key_id_of,
    payload_aad,
    rejected_aad,
    snippet_aad,
)

K1, K2 = b"1" * 32, b"2" * 32
ROW = payload_aad("dlv_a")


def test_a_sealed_body_opens_for_its_row_only_and_plaintext_passes_through() -> None:
    sealer = Sealer([("k1", K1)], {"stripe"})
    body = b'{"id": "evt_1", "card": "4242"}'
    sealed = sealer.seal("stripe", body, ROW)
    assert sealed.startswith(MAGIC) and b"4242" not in sealed and key_id_of(sealed) == "k1"
    assert sealer.open(sealed, ROW) == body
    assert sealer.seal("stripe", body, ROW) != sealed  # a fresh data key and nonce each time
    with pytest.raises(KeyUnavailable, match="does not open for this row"):
        sealer.open(sealed, payload_aad("dlv_b"))
    # Rows of another source, and rows written before, are plaintext both ways.
    assert sealer.seal("github", body, ROW) == body
    assert sealer.open(body, ROW) == body and PLAINTEXT.open(body, ROW) == body
    # Damage anywhere is refused, never returned.
    for at in (len(sealed) - 1, 20, 8):
        damaged = bytearray(sealed)
        damaged[at] ^= 1
        with pytest.raises(KeyUnavailable):
            sealer.open(bytes(damaged), ROW)
    with pytest.raises(KeyUnavailable, match="truncated"):
        sealer.open(sealed[:40], ROW)


def test_a_missing_or_different_key_of_the_same_id_is_key_unavailable() -> None:
    sealed = Sealer([("k1", K1)], {"s"}).seal("s", b"{}", ROW)
    with pytest.raises(KeyUnavailable, match="key 'k1' is not in the encryption key ring"):
        Sealer([("k2", K2)]).open(sealed, ROW)
    with pytest.raises(KeyUnavailable, match="is not the key that sealed"):
        Sealer([("k1", K2)]).open(sealed, ROW)
    with pytest.raises(KeyUnavailable):
        PLAINTEXT.open(sealed, ROW)


def test_rotation_rewraps_the_data_key_and_leaves_the_body_as_it_was() -> None:
    old = Sealer([("k1", K1)], {"s"})
    sealed = old.seal("s", b'{"a": 1}', rejected_aad("s", "ab" * 32))
    ring = Sealer([("k2", K2), ("k1", K1)], {"s"})
    rewrapped = ring.rewrap(sealed)
    assert rewrapped is not None and key_id_of(rewrapped) == "k2"
    assert rewrapped[-30:] == sealed[-30:]  # the sealed body is untouched
    assert ring.rewrap(rewrapped) is None and ring.rewrap(b"{}") is None
    assert Sealer([("k2", K2)]).open(rewrapped, rejected_aad("s", "ab" * 32)) == b'{"a": 1}'


def test_a_snippet_is_prefixed_text_that_no_cleaned_answer_begins_with() -> None:
    sealer = Sealer([("k1", K1)], {"s"})
    aad = snippet_aad("dlv_a:relay", 2)
    text = sealer.seal_text("s", 'answer "marker-7f3a9c" ✓', aad)
    assert (
        text.startswith(TEXT_PREFIX) and "marker-7f3a9c" not in text and text.isprintable() is False
    )
    assert sealer.open_text(text, aad) == 'answer "marker-7f3a9c" ✓'
    with pytest.raises(KeyUnavailable):
        sealer.open_text(text, snippet_aad("dlv_a:relay", 3))
    assert sealer.open_text("plain answer", aad) == "plain answer"
    rotated = Sealer([("k2", K2), ("k1", K1)]).rewrap_text(text)
    assert rotated is not None and key_id_of(rotated) == "k2"


def test_a_key_ring_is_read_in_order_and_a_bad_one_is_one_line_without_the_key() -> None:
    one, two = base64.b64encode(K1).decode(), base64.urlsafe_b64encode(K2).decode().rstrip("=")
    assert parse_key_ring(f" k2:{two} , k1:{one}") == (("k2", K2), ("k1", K1))
    assert parse_key_ring("") == ()
    short = base64.b64encode(b"x" * 16).decode()
    for raw, said in (
        (f"k1:{short}", "must be 32 bytes"),
        (f"k1:{one},k1:{one}", "appears twice"),
        (one, "must be ID:BASE64"),
        ("k1:not base64!", "not valid base64"),
        (f"k1:{one},", "entry 2 is empty"),
    ):
        with pytest.raises(ConfigError, match=said) as caught:
            parse_key_ring(raw, "RING")
        assert caught.value.message.startswith("RING: ")
        assert one not in caught.value.message and short not in caught.value.message


def test_sealing_is_per_source_and_needs_a_ring_only_when_something_seals() -> None:
    ring = {"HOOKINBOX_ENCRYPTION_KEYS": f"k1:{base64.b64encode(K1).decode()}"}
    source = {"secret_env": "X"}
    config = config_from_mapping(
        {
            "encryption": {"enabled": True},
            "sources": {"a": source, "b": {**source, "encrypt": False}},
        }
    )
    assert config.sealed_sources() == frozenset({"a"})
    assert config.key_ring(ring) == (("k1", K1),)
    with pytest.raises(ConfigError, match="HOOKINBOX_ENCRYPTION_KEYS is not set or empty"):
        config.key_ring({})
    off = config_from_mapping({"sources": {"a": source, "b": {**source, "encrypt": True}}})
    assert off.sealed_sources() == frozenset({"b"})
    nothing = config_from_mapping({"sources": {"a": source}})
    assert nothing.sealed_sources() == frozenset() and nothing.key_ring({}) == ()
    with pytest.raises(KeyUnavailable, match="key ring is empty"):
        Sealer([], {"a"})
