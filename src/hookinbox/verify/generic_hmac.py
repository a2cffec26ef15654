"""``scheme = "hmac"``: any provider that signs with a shared secret and an HMAC.

Configured by ``[sources.NAME.hmac]`` (:class:`~hookinbox.config.schemes.HmacOptions`):
the signature header, the algorithm (sha1, sha256, sha512), the encoding (hex, base64),
an optional prefix (``sha256=``), an optional timestamp header with the signed-content
template that uses it (``{timestamp}.{body}``), and where the id and the type are (a header
or a JSON pointer). The header may carry several space-separated signatures (rotation on
the sender's side); several secrets may be configured (rotation on ours). Offered
signatures are decoded and compared as raw digests in constant time, so hex case and
base64 padding do not matter.

``layout = "pairs"`` reads one header of ``key=value`` pairs, as Mux sends
``mux-signature: t=1565220904,v1=<hex>`` (Stripe's layout too): the timestamp is the
``timestamp_key`` pair, checked against the tolerance, each ``signature_key`` pair is a
signature, other keys are ignored (a future ``v2``).

``handshake = "zoom"``: Zoom checks an endpoint by POSTing a signed ``{"event":
"endpoint.url_validation", "payload": {"plainToken": ...}}`` and expects ``{"plainToken",
"encryptedToken"}`` back, the token's hex HMAC-SHA256 with the secret. It is answered
only after the request's own signature holds, with the secret that verified it (so a
rotation answers with the key Zoom signs with), and never queued. Answering only signed
requests keeps the endpoint from being an HMAC oracle for anyone else: the token is
signed with the very key of the signatures.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from typing import Any

from hookinbox.config.schemes import FingerprintPolicy, HmacOptions
from hookinbox.errors import ConfigError, InvalidSignature, MalformedJson, MissingHeaders
from hookinbox.payload import JSON_BODY, BodyFormat
from hookinbox.verify.base import (
    VerifiedEvent,
    check_timestamp,
    read_body,
    string_at,
)
from hookinbox.verify.fingerprint import identify

ZOOM_VALIDATION = "endpoint.url_validation"


def signed_content(options: HmacOptions, body: bytes, *, timestamp: str, event_id: str) -> bytes:
    before, after = options.signed_content.split("{body}")

    def fill(text: str) -> bytes:
        return text.replace("{timestamp}", timestamp).replace("{id}", event_id).encode()

    return fill(before) + body + fill(after)


def digest_of(options: HmacOptions, secret: bytes, content: bytes) -> bytes:
    return hmac.new(secret, content, getattr(hashlib, options.algorithm)).digest()


def encode_digest(options: HmacOptions, digest: bytes) -> str:
    text = digest.hex() if options.encoding == "hex" else base64.b64encode(digest).decode()
    return options.prefix + text


def _decode(options: HmacOptions, entry: str) -> bytes | None:
    if options.prefix:
        if not entry.startswith(options.prefix):
            return None
        entry = entry[len(options.prefix) :]
    try:
        if options.encoding == "hex":
            return bytes.fromhex(entry)
        return base64.b64decode(entry + "=" * (-len(entry) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def parse_pairs(options: HmacOptions, value: str) -> tuple[str | None, list[str]]:
    """The timestamp and the signatures of a ``t=...,v1=...`` header."""
    stamp: str | None = None
    signatures: list[str] = []
    for item in value.split(","):
        key, _, val = item.strip().partition("=")
        if key == options.timestamp_key:
            stamp = val
        elif key == options.signature_key:
            signatures.append(val)
    return stamp, signatures


class HmacVerifier:
    def __init__(
        self,
        secrets: Sequence[str],
        *,
        options: HmacOptions,
        tolerance_seconds: int = 300,
        fingerprint: FingerprintPolicy | None = None,
        body_format: BodyFormat = JSON_BODY,
    ) -> None:
        if not secrets:
            raise ConfigError("hmac needs at least one secret")
        self._secrets = [s.encode() for s in secrets]
        self._options = options
        self._tolerance = tolerance_seconds
        self._fingerprint = fingerprint
        self._body_format = body_format

    def _offered(self, headers: Mapping[str, str]) -> tuple[str | None, list[str]]:
        """The signed timestamp (if any) and the offered signatures."""
        options = self._options
        value = headers.get(options.header)
        if not value:
            raise MissingHeaders()
        if options.layout == "pairs":
            stamp, offered = parse_pairs(options, value)
            if not stamp:
                raise MissingHeaders(f"The signature header has no {options.timestamp_key}=.")
            return stamp, offered
        stamp = headers.get(options.timestamp_header) if options.timestamp_header else None
        if options.timestamp_header and not stamp:
            raise MissingHeaders()
        return stamp, value.split()

    def verify(self, body: bytes, headers: Mapping[str, str], *, now: float) -> VerifiedEvent:
        options = self._options
        stamp, offered = self._offered(headers)
        header_id = headers.get(options.id_header) if options.id_header else None
        if "{id}" in options.signed_content and not header_id:
            raise MissingHeaders()
        timestamp = None
        if stamp:
            timestamp = check_timestamp(stamp, now=now, tolerance_seconds=self._tolerance)
        content = signed_content(options, body, timestamp=stamp or "", event_id=header_id or "")
        decoded = [d for d in (_decode(options, e) for e in offered) if d is not None]
        # Every secret against every offered signature (constant time per pair); which
        # secret matched is kept for a handshake, which answers with that key.
        matched: bytes | None = None
        for secret in self._secrets:
            expected = digest_of(options, secret, content)
            for signature in decoded:
                if hmac.compare_digest(signature, expected) and matched is None:
                    matched = secret
        if matched is None:
            raise InvalidSignature()
        payload = read_body(body, headers, self._body_format)
        if options.handshake == "zoom" and payload.get("event") == ZOOM_VALIDATION:
            return zoom_validation(matched, payload, timestamp)
        event_id = header_id or string_at(payload, options.id_pointer)
        if options.type_header:
            event_type = headers.get(options.type_header, "")
        else:
            event_type = string_at(payload, options.type_pointer) or ""
        return VerifiedEvent(
            event_id=identify(event_id, payload, headers, self._fingerprint),
            event_type=event_type,
            payload=payload,
            timestamp=timestamp,
        )


def zoom_validation(secret: bytes, payload: dict[str, Any], timestamp: int | None) -> VerifiedEvent:
    """Zoom's ``endpoint.url_validation`` answer: the plain token and its HMAC."""
    token = string_at(payload, "/payload/plainToken")
    if token is None:
        raise MalformedJson("The endpoint.url_validation request has no payload.plainToken.")
    encrypted = hmac.new(secret, token.encode(), hashlib.sha256).hexdigest()
    return VerifiedEvent(
        event_id="",
        event_type=ZOOM_VALIDATION,
        payload={},
        timestamp=timestamp,
        challenge_response={"plainToken": token, "encryptedToken": encrypted},
    )


class HmacSigner:
    def __init__(self, secret: str, *, options: HmacOptions) -> None:
        self._secret = secret.encode()
        self._options = options

    def sign(
        self, body: bytes, *, event_id: str, event_type: str, timestamp: int
    ) -> dict[str, str]:
        options = self._options
        content = signed_content(options, body, timestamp=str(timestamp), event_id=event_id)
        signature = encode_digest(options, digest_of(options, self._secret, content))
        if options.layout == "pairs":
            value = f"{options.timestamp_key}={timestamp},{options.signature_key}={signature}"
            headers = {options.header: value}
        else:
            headers = {options.header: signature}
        if options.timestamp_header:
            headers[options.timestamp_header] = str(timestamp)
        if options.id_header:
            headers[options.id_header] = event_id
        if options.type_header:
            headers[options.type_header] = event_type
        return headers
