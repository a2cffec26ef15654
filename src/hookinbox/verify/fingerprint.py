"""Fingerprint ids for providers that send no event id.

A source names, in its config, the documented fields that identify an event (JSON
pointers into the body, optionally header names); the id is ``fp:`` + the SHA-256 of
their canonical values. Two deliveries of the same event then get the same id and the
journal's unique index makes the second a duplicate.

What is never a good field, and refused at start-up:

- an ``Authorization`` (or ``Proxy-Authorization``, ``Cookie``) header: a credential, and
  it changes when the token rotates, which would split one event into two;
- a signature header: it changes with every (re)delivery;
- a field the source lists in ``fingerprint_forbidden`` (a prompt, a temporary URL ...),
  or any parent or child of one, since a parent's value contains the child;
- by name, a few fields that are secrets or short-lived by nature: ``prompt``, ``secret``,
  ``password``, ``token``, ``api_key`` ... and anything ending in ``url`` (signed download
  URLs expire and are re-signed, so the "same" event would get a new id).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from hookinbox.errors import MissingEventId
from hookinbox.verify.base import MISSING, resolve_pointer
from hookinbox.verify.options import FingerprintPolicy

PREFIX = "fp:"

#: Headers that carry a credential or change on every delivery.
FORBIDDEN_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "webhook-signature",
        "svix-signature",
        "stripe-signature",
        "x-hub-signature",
        "x-hub-signature-256",
        "x-shopify-hmac-sha256",
        "shopify-hmac-sha256",
        "x-slack-signature",
    }
)

#: Last pointer segments (lower-cased, ``-`` read as ``_``) refused whatever the config says.
FORBIDDEN_FIELD_NAMES = frozenset(
    {
        "prompt",
        "secret",
        "client_secret",
        "password",
        "token",
        "access_token",
        "refresh_token",
        "api_key",
        "apikey",
        "authorization",
    }
)


def _segment_name(pointer: str) -> str:
    last = pointer.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~")
    return last.lower().replace("-", "_")


def _overlaps(pointer: str, forbidden: str) -> bool:
    """``/input`` overlaps ``/input/prompt`` and the other way round."""
    return (
        pointer == forbidden
        or pointer.startswith(forbidden + "/")
        or (forbidden.startswith(pointer + "/"))
    )


def refuse_unsafe(policy: FingerprintPolicy, forbidden: Iterable[str] = ()) -> None:
    """Raise ValueError naming the first field or header a fingerprint must not use.

    ``forbidden`` holds JSON pointers (``/input/prompt``) and header names (``x-api-key``).
    """
    forbidden_pointers = [f for f in forbidden if f.startswith("/")]
    forbidden_headers = {f.lower() for f in forbidden if not f.startswith("/")}
    for header in policy.headers:
        if header in FORBIDDEN_HEADERS or header in forbidden_headers:
            raise ValueError(
                f"header {header!r} may not be part of a fingerprint "
                "(credentials and signatures never identify an event)"
            )
    for pointer in policy.fields:
        for denied in forbidden_pointers:
            if _overlaps(pointer, denied):
                raise ValueError(
                    f"field {pointer!r} is listed in (or overlaps) fingerprint_forbidden"
                )
        name = _segment_name(pointer)
        if name in FORBIDDEN_FIELD_NAMES or name.endswith("url"):
            raise ValueError(
                f"field {pointer!r} looks like a prompt, a secret or a temporary URL; "
                "a fingerprint uses stable identifying fields only"
            )


def canonical(value: Any) -> str:
    """JSON with sorted keys, no whitespace, UTF-8 kept: one text per value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fingerprint_of(
    policy: FingerprintPolicy, payload: Mapping[str, Any], headers: Mapping[str, str]
) -> str:
    """``fp:`` + hex SHA-256 of the canonical JSON list of the named values, in order.

    Every named field must be present: a fingerprint over fewer fields than configured
    would merge distinct events, so a missing one is a :class:`MissingEventId`.
    """
    values: list[Any] = []
    for pointer in policy.fields:
        value = resolve_pointer(payload, pointer)
        if value is MISSING:
            raise MissingEventId(f"The fingerprint field {pointer} is missing from the body.")
        values.append(value)
    for header in policy.headers:
        if header not in headers:
            raise MissingEventId(f"The fingerprint header {header} is missing.")
        values.append(headers[header])
    digest = hashlib.sha256(canonical(values).encode()).hexdigest()
    return PREFIX + digest


def identify(
    event_id: str | None,
    payload: Mapping[str, Any],
    headers: Mapping[str, str],
    policy: FingerprintPolicy | None,
) -> str:
    """The provider's id when it sent one, else the fingerprint, else MissingEventId."""
    if event_id:
        return event_id
    if policy is None:
        raise MissingEventId()
    return fingerprint_of(policy, payload, headers)
