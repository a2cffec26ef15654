"""Twilio (https://www.twilio.com/docs/usage/webhooks/webhooks-security).

``X-Twilio-Signature`` is the base64 HMAC-SHA1, keyed with the account's Auth Token, of
the full URL Twilio requested followed by every POST parameter sorted by name, each as
name + value (a repeated name: its distinct values sorted, as Twilio's own
``RequestValidator`` does). A webhook matched by a Twilio *Webhook Rule* is signed with
that rule's SharedKey secret instead, and carries ``X-Twilio-Webhooks-Signature-Settings:
key=...,algorithm=HMAC_SHA256``: the algorithm is read from there (HMAC-SHA1 without it).

The URL is the source's ``twilio.url`` (what is configured in Twilio: scheme, host, path)
plus the request's own query string. Twilio is not consistent about the port, so both
the URL without and with its default port are tried, as the official library does.

Bodies are forms (``application/x-www-form-urlencoded``). A JSON body is signed over the
URL alone, whose query carries ``bodySHA256``, the hex SHA-256 of the raw body: that is
checked too. Twilio signs no timestamp (the journal's dedup is the replay guard) and
sends no event id in a standard place: the id is the field ``twilio.id_pointer`` names
(``/MessageSid`` for an incoming message), a header (``id_header``) or a fingerprint
(``/MessageSid`` + ``/MessageStatus`` for status callbacks).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from hookinbox.config.schemes import FingerprintPolicy, TwilioOptions
from hookinbox.errors import ConfigError, InvalidSignature, MissingHeaders
from hookinbox.payload import BodyFormat
from hookinbox.verify.base import QUERY, VerifiedEvent, any_digest_matches, read_body
from hookinbox.verify.fingerprint import event_of

SIGNATURE = "x-twilio-signature"
SETTINGS = "x-twilio-webhooks-signature-settings"
_ALGORITHMS = {"HMAC_SHA1": hashlib.sha1, "HMAC_SHA256": hashlib.sha256}
#: What Twilio is answered with unless the source says otherwise: empty TwiML, which
#: does nothing (a JSON answer to a messaging or voice webhook is Twilio error 12300).
EMPTY_TWIML = b'<?xml version="1.0" encoding="UTF-8"?><Response></Response>'


def algorithm_of(settings: str | None) -> str | None:
    """The algorithm the settings header names (HMAC_SHA1 without one); None if unknown."""
    for part in (settings or "").split(","):
        name, sep, value = part.partition("=")
        if sep and name.strip() == "algorithm" and value.strip():
            found = value.strip().upper()
            return found if found in _ALGORITHMS else None
    return "HMAC_SHA1"


def signed_string(url: str, params: Mapping[str, Any]) -> str:
    """The URL then each parameter as name + value, names sorted, each name's distinct
    values sorted."""
    parts = [url]
    for name in sorted(params):
        value = params[name]
        values = value if isinstance(value, list) else [value]
        parts.extend(name + v for v in sorted(set(values)))
    return "".join(parts)


def signature_of(secret: bytes, url: str, params: Mapping[str, Any], algorithm: str) -> str:
    digest = hmac.new(secret, signed_string(url, params).encode(), _ALGORITHMS[algorithm])
    return base64.b64encode(digest.digest()).decode()


def _with_and_without_port(url: str) -> list[str]:
    parts = urlsplit(url)
    if parts.port is not None:
        return [urlunsplit(parts._replace(netloc=parts.hostname or "")), url]
    port = 443 if parts.scheme == "https" else 80
    return [url, urlunsplit(parts._replace(netloc=f"{parts.netloc}:{port}"))]


def request_url(options: TwilioOptions, headers: Mapping[str, str]) -> str:
    """``twilio.url`` with the request's query string, as Twilio requested it."""
    query = headers.get(QUERY, "")
    return options.url + ("?" + query if query else "")


class TwilioVerifier:
    def __init__(
        self,
        secrets: Sequence[str],
        *,
        options: TwilioOptions,
        fingerprint: FingerprintPolicy | None = None,
        body_format: BodyFormat,
    ) -> None:
        if not secrets:
            raise ConfigError("twilio needs at least one Auth Token")
        self._secrets = [s.encode() for s in secrets]
        self._options = options
        self._fingerprint = fingerprint
        self._body_format = body_format

    def verify(self, body: bytes, headers: Mapping[str, str], *, now: float) -> VerifiedEvent:
        offered = headers.get(SIGNATURE)
        if not offered:
            raise MissingHeaders()
        algorithm = algorithm_of(headers.get(SETTINGS))
        url = request_url(self._options, headers)
        form = self._body_format.is_form(headers.get("content-type"))
        params: Mapping[str, Any] = {}
        body_ok = True
        if form:
            # The signature covers the parameters: read them before it holds, but as the
            # edge reads every form (bounded, strict), so this parse is the one kept.
            params = read_body(body, headers, self._body_format)
        else:
            stated = parse_qs(headers.get(QUERY, "")).get("bodySHA256", [""])[0]
            computed = hashlib.sha256(body).hexdigest()
            body_ok = hmac.compare_digest(stated.lower().encode(), computed.encode())
        expected = (
            [
                signature_of(secret, candidate, params, algorithm).encode()
                for secret in self._secrets
                for candidate in _with_and_without_port(url)
            ]
            if algorithm is not None
            else []
        )
        matched = any_digest_matches([offered.strip().encode()], expected)
        if not (matched and body_ok):
            raise InvalidSignature()
        payload = dict(params) if form else read_body(body, headers, self._body_format)
        event_id, event_type = event_of(self._options, payload, headers, self._fingerprint)
        return VerifiedEvent(event_id=event_id, event_type=event_type, payload=payload)


class TwilioSigner:
    """Signs a form body as Twilio does (for ``hookinbox send`` and tests)."""

    def __init__(self, secret: str, *, options: TwilioOptions) -> None:
        self._secret = secret.encode()
        self._options = options

    def sign(
        self, body: bytes, *, event_id: str, event_type: str, timestamp: int
    ) -> dict[str, str]:
        params = parse_qs(body.decode("ascii"), keep_blank_values=True)
        flat = {k: v if len(v) > 1 else v[0] for k, v in params.items()}
        signature = signature_of(self._secret, self._options.url, flat, "HMAC_SHA1")
        headers = {
            SIGNATURE: signature,
            "content-type": "application/x-www-form-urlencoded",
        }
        if self._options.id_header:
            headers[self._options.id_header] = event_id
        return headers
