"""A delivery's body as data: the JSON object it must be, and JSON pointers into it.

The receiver parses a body once its signature holds; the worker parses the stored body
again for a handler; resource routes and fingerprints read fields by JSON pointer
(RFC 6901). One parser and one pointer reader serve them all, so a body the receiver
accepted is one the worker can read.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from hookinbox.errors import MalformedJson


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
