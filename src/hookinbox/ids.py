"""Internal ids: time-ordered, so the newest-first lists are a keyset walk over the key."""

from __future__ import annotations

import os
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32, as ULID
_RANDOM_BITS = 80
_lock = threading.Lock()
_last = (0, 0)


def _base32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def new_delivery_id() -> str:
    """``dlv_`` + a monotonic ULID: 48 bits of milliseconds, then 80 bits that are random
    for the first id of a millisecond and counted up after it, so ids made by one process
    sort in the order they were made even within one millisecond."""
    global _last
    millis = time.time_ns() // 1_000_000
    with _lock:
        last_millis, last_random = _last
        if millis <= last_millis:
            millis, random_part = last_millis, last_random + 1
        else:
            random_part = int.from_bytes(os.urandom(10)) >> 1  # room to count up
        _last = (millis, random_part)
    return "dlv_" + _base32(millis, 10) + _base32(random_part % (1 << _RANDOM_BITS), 16)


def job_id(delivery_id: str, action: str) -> str:
    """A job's stable id: the same delivery and action always give the same id, which is
    also the Idempotency-Key a forward sends."""
    return f"{delivery_id}:{action}"


def delivery_id_floor(unix_seconds: float) -> str:
    """The smallest delivery id made at or after ``unix_seconds``: a time range over the
    journal is a range over its primary key."""
    return "dlv_" + _base32(max(0, int(unix_seconds * 1000)), 10)
