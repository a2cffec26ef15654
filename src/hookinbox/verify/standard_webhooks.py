"""Standard Webhooks (https://www.standardwebhooks.com), as OpenAI and Svix send it.

Signed content is ``{webhook-id}.{webhook-timestamp}.{raw body}``. ``webhook-signature``
holds space-separated ``version,signature`` entries, one per key the sender signs with:

- ``v1,<base64 HMAC-SHA256>`` with a symmetric secret ``whsec_`` + base64 of the key;
- ``v1a,<base64 ed25519 signature>`` with an asymmetric key pair: the sender keeps the
  ``whsk_`` secret key, the receiver holds only the ``whpk_`` public key (base64 of the
  32 raw bytes), so a leaked receiver config cannot forge deliveries.

The source's secret variable may hold both kinds, space-separated (rotation, migration
from v1 to v1a). Svix sends the same scheme under ``svix-id``, ``svix-timestamp`` and
``svix-signature``; those names are read when the ``webhook-*`` ones are absent. The
timestamp must be within the tolerance in both directions. The event id is the
``webhook-id`` header; the type is the body's ``type``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence

from cryptography.exceptions import InvalidSignature as _BadEd25519
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from hookinbox.errors import ConfigError, InvalidSignature, MissingEventId, MissingHeaders
from hookinbox.verify.base import (
    Sha256Hmac,
    VerifiedEvent,
    any_digest_matches,
    check_timestamp,
    event_type_of,
    parse_json_object,
)

SECRET_PREFIX = "whsec_"
PUBLIC_KEY_PREFIX = "whpk_"
PRIVATE_KEY_PREFIX = "whsk_"
#: The most ``webhook-signature`` entries looked at; the rest are ignored.
MAX_SIGNATURES = 16


def _b64(text: str, what: str) -> bytes:
    # Unpadded base64 is accepted, as the reference library does.
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"a standard-webhooks {what} is not valid base64") from None


def decode_secret(secret: str) -> bytes:
    """The HMAC key of a ``whsec_`` secret (the prefix is optional, as in the reference lib)."""
    key = _b64(secret.removeprefix(SECRET_PREFIX), "secret (whsec_)")
    if not key:
        raise ConfigError("a standard-webhooks secret is empty")
    return key


def decode_public_key(key: str) -> Ed25519PublicKey:
    raw = _b64(key.removeprefix(PUBLIC_KEY_PREFIX), "public key (whpk_)")
    if len(raw) != 32:
        raise ConfigError("a standard-webhooks public key (whpk_) must be 32 bytes")
    return Ed25519PublicKey.from_public_bytes(raw)


def decode_private_key(key: str) -> Ed25519PrivateKey:
    """A ``whsk_`` key: the 32-byte seed, or the 64-byte seed + public key (libsodium form)."""
    raw = _b64(key.removeprefix(PRIVATE_KEY_PREFIX), "secret key (whsk_)")
    if len(raw) not in (32, 64):
        raise ConfigError("a standard-webhooks secret key (whsk_) must be 32 or 64 bytes")
    return Ed25519PrivateKey.from_private_bytes(raw[:32])


def signed_content(event_id: str, timestamp: int | str, body: bytes) -> bytes:
    return f"{event_id}.{timestamp}.".encode() + body


def signature_of(key: bytes, event_id: str, timestamp: int | str, body: bytes) -> str:
    digest = Sha256Hmac(key).digest(signed_content(event_id, timestamp, body))
    return binascii.b2a_base64(digest, newline=False).decode()


class StandardWebhooksVerifier:
    def __init__(self, secrets: Sequence[str], *, tolerance_seconds: int = 300) -> None:
        if not secrets:
            raise ConfigError("standard-webhooks needs at least one secret or public key")
        # Each key's HMAC state is set up once, not per delivery.
        self._keys = [
            Sha256Hmac(decode_secret(s)) for s in secrets if not s.startswith(PUBLIC_KEY_PREFIX)
        ]
        self._public_keys = [
            decode_public_key(s) for s in secrets if s.startswith(PUBLIC_KEY_PREFIX)
        ]
        self._tolerance = tolerance_seconds

    def verify(self, body: bytes, headers: Mapping[str, str], *, now: float) -> VerifiedEvent:
        # Svix's names only when the webhook-* ones are absent (or empty).
        event_id = headers.get("webhook-id") or headers.get("svix-id")
        stamp = headers.get("webhook-timestamp") or headers.get("svix-timestamp")
        offered = headers.get("webhook-signature") or headers.get("svix-signature")
        if not stamp or not offered:
            raise MissingHeaders()
        if not event_id:  # the id header is the event id (and part of the signed content)
            raise MissingEventId()
        timestamp = check_timestamp(stamp, now=now, tolerance_seconds=self._tolerance)
        if not self._matches(offered, signed_content(event_id, stamp, body)):
            raise InvalidSignature()
        payload = parse_json_object(body)
        # Positional (id, type, payload, timestamp): keywords cost a dict per delivery.
        return VerifiedEvent(event_id, event_type_of(payload), payload, timestamp)

    def _matches(self, offered: str, content: bytes) -> bool:
        symmetric: list[bytes] = []
        asymmetric: list[bytes] = []
        # A sender signs with a key or two (three while rotating); more entries are
        # ignored, so a header full of v1a entries costs at most this many ed25519 checks.
        for entry in offered.split(maxsplit=MAX_SIGNATURES)[:MAX_SIGNATURES]:
            version, _, signature = entry.partition(",")
            if version == "v1":
                symmetric.append(signature.encode())
            elif version == "v1a":
                asymmetric.append(signature.encode())
        expected = [binascii.b2a_base64(key.digest(content), newline=False) for key in self._keys]
        found = any_digest_matches(symmetric, expected)
        for encoded in asymmetric:
            try:
                raw = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                continue
            for public_key in self._public_keys:
                try:
                    public_key.verify(raw, content)
                except _BadEd25519:
                    continue
                found = True
        return found


class StandardWebhooksSigner:
    """Signs with a ``whsec_`` secret (``v1``) or a ``whsk_`` secret key (``v1a``)."""

    def __init__(self, secret: str) -> None:
        self._private: Ed25519PrivateKey | None = None
        self._key = b""
        if secret.startswith(PRIVATE_KEY_PREFIX):
            self._private = decode_private_key(secret)
        elif secret.startswith(PUBLIC_KEY_PREFIX):
            raise ConfigError("a whpk_ public key cannot sign; give the whsk_ secret key")
        else:
            self._key = decode_secret(secret)

    def sign(
        self, body: bytes, *, event_id: str, event_type: str, timestamp: int
    ) -> dict[str, str]:
        if self._private is not None:
            raw = self._private.sign(signed_content(event_id, timestamp, body))
            signature = "v1a," + base64.b64encode(raw).decode()
        else:
            signature = "v1," + signature_of(self._key, event_id, timestamp, body)
        return {
            "webhook-id": event_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": signature,
        }


def public_key_of(secret_key: str) -> str:
    """The ``whpk_`` public key that verifies what a ``whsk_`` secret key signs."""
    public = decode_private_key(secret_key).public_key()
    raw = public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return PUBLIC_KEY_PREFIX + base64.b64encode(raw).decode()
