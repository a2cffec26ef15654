"""Fingerprint ids for providers that send no event id.

A source names, in its config, the documented fields that identify an event (JSON
pointers into the body, optionally header names); the id is ``fp:`` + the SHA-256 of
their canonical values. Two deliveries of the same event then get the same id and the
journal's unique index makes the second a duplicate.

What may never take part (credentials, signatures, prompts, temporary URLs) is refused
at start-up by the config (:func:`hookinbox.config.schemes.refuse_unsafe`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from hookinbox.config.schemes import EventFields, FingerprintPolicy
from hookinbox.errors import MissingEventId
from hookinbox.verify.base import MISSING, resolve_pointer, string_at

PREFIX = "fp:"


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


def event_of(
    fields: EventFields,
    payload: Mapping[str, Any],
    headers: Mapping[str, str],
    policy: FingerprintPolicy | None,
) -> tuple[str, str]:
    """``(event id, event type)`` where ``fields`` says they are (a header or a JSON
    pointer), the id falling back to the fingerprint."""
    if fields.id_header is not None:
        found: str | None = headers.get(fields.id_header)
    else:
        found = string_at(payload, fields.id_pointer)
    if fields.type_header is not None:
        event_type = headers.get(fields.type_header, "")
    else:
        event_type = string_at(payload, fields.type_pointer) or ""
    return identify(found, payload, headers, policy), event_type
