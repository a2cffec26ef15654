"""The Standard Webhooks check every peer receiver does: the same as bench/naive_receiver.py.

HMAC-SHA256 over ``{id}.{ts}.{body}`` with the ``whsec_`` secret from ``BENCH_SECRET``,
``v1,`` signatures compared in constant time, a 300 s timestamp tolerance; then the body
must be a JSON object, whose ``type`` is the event type.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

TOLERANCE_S = 300
MAX_BODY = 1024 * 1024


def _secret_key() -> bytes:
    return base64.b64decode(os.environ["BENCH_SECRET"].removeprefix("whsec_"))


KEY = _secret_key()


@dataclass(frozen=True)
class Verified:
    event_id: str
    event_type: str | None


class Refused(Exception):
    """The delivery is refused (400) with a short reason code."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def verify(headers: Mapping[str, str], body: bytes) -> Verified:
    msg_id = headers.get("webhook-id")
    ts = headers.get("webhook-timestamp")
    sigs = headers.get("webhook-signature")
    if not msg_id or not ts or not sigs:
        raise Refused("missing_headers")
    try:
        ts_int = int(ts)
    except ValueError:
        raise Refused("bad_timestamp") from None
    if abs(time.time() - ts_int) > TOLERANCE_S:
        raise Refused("timestamp_out_of_tolerance")
    signed = msg_id.encode() + b"." + ts.encode() + b"." + body
    expected = base64.b64encode(hmac.new(KEY, signed, hashlib.sha256).digest())
    for part in sigs.split():
        version, _, sig = part.partition(",")
        if version == "v1" and hmac.compare_digest(sig.encode(), expected):
            break
    else:
        raise Refused("bad_signature")
    try:
        payload = json.loads(body)
    except ValueError:
        raise Refused("bad_json") from None
    if not isinstance(payload, dict):
        raise Refused("bad_json")
    event_type = payload.get("type")
    return Verified(msg_id, event_type if isinstance(event_type, str) else None)
