"""Stripe (https://docs.stripe.com/webhooks#verify-manually).

``Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...]``: each ``v1`` is the hex
HMAC-SHA256 of ``{t}.{raw body}`` keyed with the endpoint's ``whsec_`` secret used as given
(UTF-8, not base64-decoded). Several ``v1`` entries appear while a rolled secret and its
predecessor are both live; ``v0`` entries (test-mode legacy) are ignored. The timestamp is
checked against the tolerance in both directions (Stripe's library checks only the past;
its default tolerance, 300 s, is ours). The event id is the body's ``id`` (``evt_...``), the
type its ``type``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence

from hookinbox.config.schemes import FingerprintPolicy
from hookinbox.errors import ConfigError, InvalidSignature, MissingHeaders
from hookinbox.verify.base import (
    VerifiedEvent,
    any_digest_matches,
    check_timestamp,
    event_type_of,
    parse_json_object,
    string_at,
)
from hookinbox.verify.fingerprint import identify

HEADER = "stripe-signature"


def signature_of(secret: bytes, timestamp: int | str, body: bytes) -> str:
    return hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def parse_header(value: str) -> tuple[str | None, list[bytes]]:
    """The ``t`` value and every ``v1`` signature of a Stripe-Signature header."""
    stamp: str | None = None
    signatures: list[bytes] = []
    for item in value.split(","):
        key, _, val = item.strip().partition("=")
        if key == "t":
            stamp = val
        elif key == "v1":
            signatures.append(val.encode())
    return stamp, signatures


class StripeVerifier:
    def __init__(
        self,
        secrets: Sequence[str],
        *,
        tolerance_seconds: int = 300,
        fingerprint: FingerprintPolicy | None = None,
    ) -> None:
        if not secrets:
            raise ConfigError("stripe needs at least one whsec_ secret")
        self._secrets = [s.encode() for s in secrets]
        self._tolerance = tolerance_seconds
        self._fingerprint = fingerprint

    def verify(self, body: bytes, headers: Mapping[str, str], *, now: float) -> VerifiedEvent:
        header = headers.get(HEADER)
        if not header:
            raise MissingHeaders()
        stamp, offered = parse_header(header)
        if not stamp:
            raise MissingHeaders("The Stripe-Signature header has no t= timestamp.")
        timestamp = check_timestamp(stamp, now=now, tolerance_seconds=self._tolerance)
        expected = [signature_of(secret, stamp, body).encode() for secret in self._secrets]
        if not any_digest_matches(offered, expected):
            raise InvalidSignature()
        payload = parse_json_object(body)
        return VerifiedEvent(
            event_id=identify(string_at(payload, "/id"), payload, headers, self._fingerprint),
            event_type=event_type_of(payload),
            payload=payload,
            timestamp=timestamp,
        )


class StripeSigner:
    def __init__(self, secret: str) -> None:
        self._secret = secret.encode()

    def sign(
        self, body: bytes, *, event_id: str, event_type: str, timestamp: int
    ) -> dict[str, str]:
        signature = signature_of(self._secret, timestamp, body)
        return {HEADER: f"t={timestamp},v1={signature}"}
