"""The contract every signature scheme implements.

A verifier is built once per source from its config and its secrets, then called for
every delivery with the raw body bytes and the headers (names lower-cased). It checks in
a fixed order -- required headers, timestamp, signature, body, event id -- so each
failure maps to exactly one error code, and it parses the body only after the
signature holds. Comparison is constant-time (:func:`hmac.compare_digest`) over every
configured secret and every offered signature. The clock is passed in, never read here.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from hookinbox.errors import MalformedJson, TimestampOutOfTolerance


@dataclass(frozen=True, slots=True)
class VerifiedEvent:
    """What a verifier vouches for: the event's identity, its type and its parsed body."""

    event_id: str
    event_type: str
    payload: dict[str, Any]
    #: The signed timestamp (unix seconds), when the scheme has one.
    timestamp: int | None = None
    #: Set when the scheme answers the request itself instead of queueing it (Slack's
    #: url_verification): the JSON body to answer with.
    challenge_response: dict[str, Any] | None = None


class Verifier(Protocol):
    """``verify(raw, headers, now=...) -> VerifiedEvent`` or a VerificationError."""

    def verify(self, body: bytes, headers: Mapping[str, str], *, now: float) -> VerifiedEvent:
        """Authenticate one delivery; raise a :class:`~hookinbox.errors.VerificationError`."""
        ...


class Signer(Protocol):
    """Signs a test delivery the way the provider would (``hookinbox send``)."""

    def sign(
        self, body: bytes, *, event_id: str, event_type: str, timestamp: int
    ) -> dict[str, str]:
        """Headers to send with ``body``."""
        ...


def parse_json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or MalformedJson."""
    try:
        payload = orjson.loads(body)  # several times faster, on the hot path
    except orjson.JSONDecodeError:
        # orjson refuses a few things the JSON spec allows (integers past 64 bits):
        # the standard parser has the last word.
        try:
            payload = json.loads(body)
        except (UnicodeDecodeError, ValueError):
            raise MalformedJson() from None
    if not isinstance(payload, dict):
        raise MalformedJson("The body is a JSON value but not an object.")
    return payload


def event_type_of(payload: Mapping[str, Any]) -> str:
    value = payload.get("type")
    return value if isinstance(value, str) else ""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: What :func:`resolve_pointer` returns when the pointer names nothing.
MISSING: Any = _Missing()


def resolve_pointer(payload: Any, pointer: str) -> Any:
    """The value a JSON pointer (RFC 6901) names, or :data:`MISSING`."""
    value = payload
    for raw in pointer.split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict):
            if token not in value:
                return MISSING
            value = value[token]
        elif isinstance(value, list) and token.isdigit():
            index = int(token)
            if index >= len(value):
                return MISSING
            value = value[index]
        else:
            return MISSING
    return value


def string_at(payload: Any, pointer: str | None) -> str | None:
    """A non-empty string or integer at ``pointer``, as text; None otherwise."""
    if pointer is None:
        return None
    value = resolve_pointer(payload, pointer)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    return value if isinstance(value, str) and value else None


def check_timestamp(stamp: str, *, now: float, tolerance_seconds: int) -> int:
    """Unix seconds from a signed header, within ``tolerance_seconds`` of ``now`` either way.

    A timestamp from the future is refused like an old one: a sender's clock may drift a
    little, but a far-future signature would stay replayable for longer than the window.
    """
    try:
        timestamp = int(stamp.strip())
    except ValueError:
        raise TimestampOutOfTolerance("The signed timestamp is not an integer.") from None
    if abs(now - timestamp) > tolerance_seconds:
        raise TimestampOutOfTolerance()
    return timestamp


def any_digest_matches(offered: Sequence[bytes], expected: Sequence[bytes]) -> bool:
    """Whether any offered signature equals any expected one, in constant time per pair.

    Every pair is compared (no early exit), so the time taken says nothing about which
    secret or which offered signature matched.
    """
    found = False
    for signature in offered:
        for candidate in expected:
            found |= hmac.compare_digest(signature, candidate)
    return found
