"""The precomputed HMAC-SHA256 is HMAC-SHA256: the standard library's digest for every
key length around SHA-256's block (shorter, equal, longer: hashed first) and body size."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from hookinbox.verify.base import Sha256Hmac


@pytest.mark.parametrize("key_length", [1, 24, 32, 63, 64, 65, 200])
@pytest.mark.parametrize("message_length", [0, 1, 64, 360, 10_000])
def test_the_digest_is_the_standard_librarys(key_length: int, message_length: int) -> None:
    key = bytes(range(7, 7 + key_length)) if key_length < 240 else bytes(key_length)
    message = (b"msg_1.1700000000." + b"x" * message_length)[:message_length]
    expected = hmac.new(key, message, hashlib.sha256).digest()
    keyed = Sha256Hmac(key)
    assert keyed.digest(message) == expected
    assert keyed.digest(message) == expected  # the key's state is not used up


def test_an_empty_key_is_hmacs_empty_key() -> None:
    assert Sha256Hmac(b"").digest(b"body") == hmac.new(b"", b"body", hashlib.sha256).digest()
