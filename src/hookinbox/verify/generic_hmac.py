"""``scheme = "hmac"``: any provider that signs with a shared secret and an HMAC.

Configured by ``[sources.NAME.hmac]`` (:class:`~hookinbox.config.schemes.HmacOptions`):
the signature header, the algorithm (sha1, sha256, sha512), the encoding (hex, base64),
an optional prefix (``sha256=``), an optional timestamp header with the signed-content
template that uses it (``{timestamp}.{body}``), and where the id and the type are (a header
or a JSON pointer). The header may carry several space-separated signatures (rotation on
the sender's side); several secrets may be configured (rotation on ours). Offered
signatures are decoded and compared as raw digests in constant time, so hex case and
base64 padding do not matter.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping, Sequence

from hookinbox.config.schemes import FingerprintPolicy, HmacOptions
from hookinbox.errors import ConfigError, InvalidSignature, MissingHeaders
from hookinbox.verify.base import (
    VerifiedEvent,
    any_digest_matches,
    check_timestamp,
    parse_json_object,
    string_at,
)
from hookinbox.verify.fingerprint import identify


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


class HmacVerifier:
    def __init__(
        self,
        secrets: Sequence[str],
        *,
        options: HmacOptions,
        tolerance_seconds: int = 300,
        fingerprint: FingerprintPolicy | None = None,
    ) -> None:
        if not secrets:
            raise ConfigError("hmac needs at least one secret")
        self._secrets = [s.encode() for s in secrets]
        self._options = options
        self._tolerance = tolerance_seconds
        self._fingerprint = fingerprint

    def verify(self, body: bytes, headers: Mapping[str, str], *, now: float) -> VerifiedEvent:
        options = self._options
        offered = headers.get(options.header)
        stamp = headers.get(options.timestamp_header) if options.timestamp_header else None
        header_id = headers.get(options.id_header) if options.id_header else None
        if not offered or (options.timestamp_header and not stamp):
            raise MissingHeaders()
        if "{id}" in options.signed_content and not header_id:
            raise MissingHeaders()
        timestamp = None
        if stamp:
            timestamp = check_timestamp(stamp, now=now, tolerance_seconds=self._tolerance)
        content = signed_content(options, body, timestamp=stamp or "", event_id=header_id or "")
        decoded = [d for d in (_decode(options, e) for e in offered.split()) if d is not None]
        expected = [digest_of(options, secret, content) for secret in self._secrets]
        if not any_digest_matches(decoded, expected):
            raise InvalidSignature()
        payload = parse_json_object(body)
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


class HmacSigner:
    def __init__(self, secret: str, *, options: HmacOptions) -> None:
        self._secret = secret.encode()
        self._options = options

    def sign(
        self, body: bytes, *, event_id: str, event_type: str, timestamp: int
    ) -> dict[str, str]:
        options = self._options
        content = signed_content(options, body, timestamp=str(timestamp), event_id=event_id)
        headers = {
            options.header: encode_digest(options, digest_of(options, self._secret, content))
        }
        if options.timestamp_header:
            headers[options.timestamp_header] = str(timestamp)
        if options.id_header:
            headers[options.id_header] = event_id
        if options.type_header:
            headers[options.type_header] = event_type
        return headers
