"""Shopify (https://shopify.dev/docs/apps/build/webhooks/subscribe/https).

``X-Shopify-Hmac-Sha256``: base64 HMAC-SHA256 of the raw body keyed with the app's client
secret (or the store's webhook signing key), UTF-8. The type is ``X-Shopify-Topic``
(``orders/create``).

The id: Shopify's "Ignore duplicate webhooks" page
(https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates) says to take
``X-Shopify-Event-Id``: the same value on more than one webhook means a duplicate. It
names the *event*, so it also folds the copies that arrive when two subscriptions cover
the same topic, which is what "process each business event once" needs.
``X-Shopify-Webhook-Id`` names one *delivery* (kept across retries); older guidance used
it, and it is the fallback when a delivery has no event id (older API versions). A source
can choose it with ``[sources.NAME.shopify] dedup_on = "webhook"``.

The newer Events deliveries send the same headers without the ``X-`` prefix
(``Shopify-Hmac-Sha256``, ``Shopify-Webhook-Id``); both spellings are read. Shopify signs
no timestamp (``X-Shopify-Triggered-At`` is not covered by the HMAC), so as with GitHub
the journal's dedup is the only replay guard.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from hookinbox.config.schemes import FingerprintPolicy, ShopifyOptions
from hookinbox.errors import ConfigError, InvalidSignature, MissingHeaders
from hookinbox.verify.base import VerifiedEvent, any_digest_matches, parse_json_object
from hookinbox.verify.fingerprint import identify


def signature_of(secret: bytes, body: bytes) -> str:
    return base64.b64encode(hmac.new(secret, body, hashlib.sha256).digest()).decode()


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return headers.get(f"x-shopify-{name}") or headers.get(f"shopify-{name}")


class ShopifyVerifier:
    def __init__(
        self,
        secrets: Sequence[str],
        *,
        options: ShopifyOptions | None = None,
        fingerprint: FingerprintPolicy | None = None,
    ) -> None:
        if not secrets:
            raise ConfigError("shopify needs at least one secret")
        self._secrets = [s.encode() for s in secrets]
        self._dedup_on = (options or ShopifyOptions()).dedup_on
        self._fingerprint = fingerprint

    def verify(self, body: bytes, headers: Mapping[str, str], *, now: float) -> VerifiedEvent:
        offered = _header(headers, "hmac-sha256")
        if not offered:
            raise MissingHeaders()
        expected = [signature_of(secret, body).encode() for secret in self._secrets]
        if not any_digest_matches([offered.strip().encode()], expected):
            raise InvalidSignature()
        payload = parse_json_object(body)
        if self._dedup_on == "event":
            event_id = _header(headers, "event-id") or _header(headers, "webhook-id")
        else:
            event_id = _header(headers, "webhook-id")
        return VerifiedEvent(
            event_id=identify(event_id, payload, headers, self._fingerprint),
            event_type=_header(headers, "topic") or "",
            payload=payload,
            timestamp=None,
        )


class ShopifySigner:
    def __init__(self, secret: str) -> None:
        self._secret = secret.encode()

    def sign(
        self, body: bytes, *, event_id: str, event_type: str, timestamp: int
    ) -> dict[str, str]:
        triggered = datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")
        return {
            "x-shopify-hmac-sha256": signature_of(self._secret, body),
            "x-shopify-topic": event_type,
            "x-shopify-event-id": event_id,
            "x-shopify-webhook-id": event_id,
            "x-shopify-triggered-at": triggered,
        }
