"""GitHub (https://docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries).

``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>`` keyed with the
webhook's secret (UTF-8). The id is ``X-GitHub-Delivery``: a GUID per event that a
redelivery keeps (github/docs#32822, "unique per event, not per delivery"), so it is the
right dedup key. The type is ``X-GitHub-Event`` (``push``, ``pull_request``; the body's
``action`` says more).

GitHub signs no timestamp, so a captured delivery stays valid for ever: the journal's
dedup on the delivery id is the only replay guard, which is why the key retention must
outlive any redelivery. The legacy SHA-1 ``X-Hub-Signature`` is not accepted. Configure
the webhook with content type ``application/json``; form-encoded bodies are refused.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence

from hookinbox.config.schemes import FingerprintPolicy
from hookinbox.errors import ConfigError, InvalidSignature, MissingHeaders
from hookinbox.verify.base import VerifiedEvent, any_digest_matches, parse_json_object
from hookinbox.verify.fingerprint import identify

SIGNATURE = "x-hub-signature-256"
DELIVERY = "x-github-delivery"
EVENT = "x-github-event"
_PREFIX = "sha256="


def signature_of(secret: bytes, body: bytes) -> str:
    return _PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


class GitHubVerifier:
    def __init__(
        self, secrets: Sequence[str], *, fingerprint: FingerprintPolicy | None = None
    ) -> None:
        if not secrets:
            raise ConfigError("github needs at least one secret")
        self._secrets = [s.encode() for s in secrets]
        self._fingerprint = fingerprint

    def verify(self, body: bytes, headers: Mapping[str, str], *, now: float) -> VerifiedEvent:
        offered = headers.get(SIGNATURE)
        if not offered:
            raise MissingHeaders()
        expected = [signature_of(secret, body).encode() for secret in self._secrets]
        if not any_digest_matches([offered.strip().encode()], expected):
            raise InvalidSignature()
        payload = parse_json_object(body)
        return VerifiedEvent(
            event_id=identify(headers.get(DELIVERY), payload, headers, self._fingerprint),
            event_type=headers.get(EVENT, ""),
            payload=payload,
            timestamp=None,
        )


class GitHubSigner:
    def __init__(self, secret: str) -> None:
        self._secret = secret.encode()

    def sign(
        self, body: bytes, *, event_id: str, event_type: str, timestamp: int
    ) -> dict[str, str]:
        return {
            SIGNATURE: signature_of(self._secret, body),
            DELIVERY: event_id,
            EVENT: event_type,
        }
