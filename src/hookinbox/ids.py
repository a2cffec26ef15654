"""Internal ids: time-ordered, so the newest-first lists are a keyset walk over the key."""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32, as ULID


def _base32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def new_delivery_id() -> str:
    """``dlv_`` + a ULID: 48 bits of milliseconds, then 80 random bits."""
    millis = time.time_ns() // 1_000_000
    return "dlv_" + _base32(millis, 10) + _base32(int.from_bytes(os.urandom(10)), 16)


def job_id(delivery_id: str, action: str) -> str:
    """A job's stable id: the same delivery and action always give the same id, which is
    also the Idempotency-Key a forward sends."""
    return f"{delivery_id}:{action}"
