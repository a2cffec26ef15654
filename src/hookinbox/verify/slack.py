"""Slack Events API (https://docs.slack.dev/authentication/verifying-requests-from-slack).

``X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:{timestamp}:{raw body}">`` keyed with the
app's signing secret (UTF-8); ``X-Slack-Request-Timestamp`` must be within the tolerance
(Slack recommends five minutes) in both directions.

The id is the body's ``event_id`` (kept across Slack's retries, which add
``X-Slack-Retry-Num``). The type is the inner ``event.type`` of an ``event_callback``
(``app_mention``, ``message`` ...), else the outer ``type``. A ``url_verification``
request -- sent once when the Request URL is saved -- is answered with its ``challenge``
after the signature holds, and never queued.

Interactivity and slash commands are forms, signed the same way. With ``body = "auto"``
(or ``"form"``) a source takes them: a slash command's fields, or interactivity's
``payload`` field parsed as JSON. Their id is ``trigger_id`` (top level for a slash
command, in ``payload`` for interactivity; Slack makes one per user action), else the
source's fingerprint; their type is the command (``/deploy``) or the interaction's
``payload.type`` (``block_actions``, ``view_submission``). With the default ``body =
"json"`` they are refused as malformed JSON.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from typing import Any

from hookinbox.config.schemes import FingerprintPolicy
from hookinbox.errors import ConfigError, InvalidSignature, MalformedJson, MissingHeaders
from hookinbox.payload import JSON_BODY, BodyFormat
from hookinbox.verify.base import (
    VerifiedEvent,
    any_digest_matches,
    check_timestamp,
    event_type_of,
    read_body,
    string_at,
)
from hookinbox.verify.fingerprint import identify

SIGNATURE = "x-slack-signature"
TIMESTAMP = "x-slack-request-timestamp"
URL_VERIFICATION = "url_verification"


def signature_of(secret: bytes, timestamp: int | str, body: bytes) -> str:
    signed = f"v0:{timestamp}:".encode() + body
    return "v0=" + hmac.new(secret, signed, hashlib.sha256).hexdigest()


def _event_type(payload: Mapping[str, Any]) -> str:
    outer = event_type_of(payload)
    if outer == "event_callback":
        return string_at(payload, "/event/type") or outer
    return outer


class SlackVerifier:
    def __init__(
        self,
        secrets: Sequence[str],
        *,
        tolerance_seconds: int = 300,
        fingerprint: FingerprintPolicy | None = None,
        body_format: BodyFormat = JSON_BODY,
    ) -> None:
        if not secrets:
            raise ConfigError("slack needs at least one signing secret")
        self._secrets = [s.encode() for s in secrets]
        self._tolerance = tolerance_seconds
        self._fingerprint = fingerprint
        self._body_format = body_format

    def verify(self, body: bytes, headers: Mapping[str, str], *, now: float) -> VerifiedEvent:
        offered = headers.get(SIGNATURE)
        stamp = headers.get(TIMESTAMP)
        if not offered or not stamp:
            raise MissingHeaders()
        timestamp = check_timestamp(stamp, now=now, tolerance_seconds=self._tolerance)
        expected = [signature_of(secret, stamp, body).encode() for secret in self._secrets]
        if not any_digest_matches([offered.strip().encode()], expected):
            raise InvalidSignature()
        payload = read_body(body, headers, self._body_format)
        if self._body_format.is_form(headers.get("content-type")):
            return self._form_event(payload, headers, timestamp)
        if event_type_of(payload) == URL_VERIFICATION:
            challenge = payload.get("challenge")
            if not isinstance(challenge, str):
                raise MalformedJson("The url_verification request has no challenge.")
            return VerifiedEvent(
                event_id="",
                event_type=URL_VERIFICATION,
                payload={},
                timestamp=timestamp,
                challenge_response={"challenge": challenge},
            )
        return VerifiedEvent(
            event_id=identify(string_at(payload, "/event_id"), payload, headers, self._fingerprint),
            event_type=_event_type(payload),
            payload=payload,
            timestamp=timestamp,
        )

    def _form_event(
        self, payload: dict[str, Any], headers: Mapping[str, str], timestamp: int
    ) -> VerifiedEvent:
        """A slash command (``command`` at the top) or an interaction (``payload``)."""
        command = string_at(payload, "/command")
        trigger = string_at(payload, "/trigger_id") or string_at(payload, "/payload/trigger_id")
        return VerifiedEvent(
            event_id=identify(trigger, payload, headers, self._fingerprint),
            event_type=command or string_at(payload, "/payload/type") or "",
            payload=payload,
            timestamp=timestamp,
        )


class SlackSigner:
    def __init__(self, secret: str) -> None:
        self._secret = secret.encode()

    def sign(
        self, body: bytes, *, event_id: str, event_type: str, timestamp: int
    ) -> dict[str, str]:
        return {
            SIGNATURE: signature_of(self._secret, timestamp, body),
            TIMESTAMP: str(timestamp),
        }
