"""Standard Webhooks ``v1`` signatures: HMAC-SHA256 over ``{id}.{timestamp}.{body}``.

Written here from the specification (https://www.standardwebhooks.com/) rather than taken
from hookinbox, so the load checks hookinbox against the contract, not against itself.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
import time
from dataclasses import dataclass, field

SECRET_PREFIX = "whsec_"


@dataclass(frozen=True)
class Signer:
    """Signs (and re-checks) deliveries with one ``whsec_`` secret."""

    key: bytes = field(repr=False)

    @classmethod
    def generate(cls, rng: random.Random) -> Signer:
        return cls(rng.randbytes(32))

    @classmethod
    def from_secret(cls, secret: str) -> Signer:
        return cls(base64.b64decode(secret.removeprefix(SECRET_PREFIX)))

    @property
    def secret(self) -> str:
        return SECRET_PREFIX + base64.b64encode(self.key).decode()

    def signature(self, event_id: str, timestamp: str, body: bytes) -> str:
        signed = f"{event_id}.{timestamp}.".encode() + body
        return base64.b64encode(hmac.new(self.key, signed, hashlib.sha256).digest()).decode()

    def headers(self, event_id: str, body: bytes) -> dict[str, str]:
        """The headers of one attempt; each attempt is signed afresh, like a provider does."""
        timestamp = str(int(time.time()))
        return {
            "content-type": "application/json",
            "webhook-id": event_id,
            "webhook-timestamp": timestamp,
            "webhook-signature": "v1," + self.signature(event_id, timestamp, body),
        }

    def verify(self, event_id: str, timestamp: str, signatures: str, body: bytes) -> bool:
        """True when one of the space-separated ``v1,…`` signatures matches (no tolerance)."""
        expected = self.signature(event_id, timestamp, body)
        return any(
            hmac.compare_digest(offered.removeprefix("v1,"), expected)
            for offered in signatures.split()
            if offered.startswith("v1,")
        )
