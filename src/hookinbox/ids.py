"""Internal ids: time-ordered, so the newest-first lists are a keyset walk over the key."""

from __future__ import annotations

import itertools
import os
import random
import threading
import time

_RANDOM_BITS = 80
_lock = threading.Lock()
_last = (0, 0)
#: Seeded from the OS here and again in a forked child; our own, so a handler seeding
#: the random module (or a test tool doing so) cannot make two processes' ids repeat.
_random = random.Random()


def new_delivery_id() -> str:
    """``dlv_`` + 32 hex digits: 48 bits of milliseconds, then 80 bits that are random for
    the first id of a millisecond and counted up after it, so ids made by one process
    sort in the order they were made even within one millisecond (a ULID's layout, in
    hex: one C-level format on the hot path instead of a base32 loop)."""
    global _last
    millis = time.time_ns() // 1_000_000
    with _lock:
        last_millis, last_random = _last
        if millis <= last_millis:
            millis, random_part = last_millis, last_random + 1
        else:
            # A generator seeded from the OS, not os.urandom: a system call per delivery
            # cost more than the rest of the id. The id only has to be unique, not
            # secret (it grants nothing).
            random_part = _random.getrandbits(_RANDOM_BITS - 1)  # room to count up
        _last = (millis, random_part)
    return f"dlv_{millis:012x}{random_part % (1 << _RANDOM_BITS):020x}"


def new_rejected_id() -> str:
    """``rej_`` + the same time-ordered digits as a delivery id: a rejected delivery."""
    return "rej_" + new_delivery_id()[4:]


_REQUEST_PREFIX = os.urandom(4).hex()
_request_count = itertools.count(1)


def _after_fork() -> None:
    """A forked child draws and counts apart from its parent."""
    global _REQUEST_PREFIX, _request_count
    _random.seed()
    _REQUEST_PREFIX, _request_count = os.urandom(4).hex(), itertools.count(1)


os.register_at_fork(after_in_child=_after_fork)


def new_request_id() -> str:
    """A request's id for its log lines, when the caller sent none that looks like one:
    a random prefix per process and a count (unique, cheap; a secret token per request
    cost a system call each)."""
    return f"{_REQUEST_PREFIX}{next(_request_count):08x}"


def job_id(delivery_id: str, action: str) -> str:
    """A job's stable id: the same delivery and action always give the same id, which is
    also the Idempotency-Key a forward sends."""
    return f"{delivery_id}:{action}"


def delivery_id_seconds(delivery_id: str) -> float:
    """When a delivery id was made (Unix seconds, to the millisecond), by its maker's clock."""
    return int(delivery_id[4:16], 16) / 1000


def delivery_id_after(delivery_id: str) -> str:
    """The first id of the millisecond after ``delivery_id``'s: above every id that
    begins with it (its jobs' ids), in any collation. An id of another shape (made by
    hand) gets the highest character after it."""
    try:
        return f"dlv_{int(delivery_id[4:16], 16) + 1:012x}"
    except ValueError:
        return f"{delivery_id}\U0010ffff"


def delivery_id_floor(unix_seconds: float) -> str:
    """The smallest delivery id made at or after ``unix_seconds``: a time range over the
    journal is a range over its primary key."""
    return f"dlv_{max(0, int(unix_seconds * 1000)):012x}"


def forward_effect_key(job_id: str) -> str:
    """The ledger key of a forward's POST: one per job, so a replay of a completed
    delivery finds it recorded and does not post again (unless its effects are forced)."""
    return f"forward:{job_id}"
