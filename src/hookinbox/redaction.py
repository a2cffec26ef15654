"""Fields taken out of a payload before it is stored, and the keyed hash of a value.

The receiver redacts a verified body once, before its reservation: the fields its
source's and matched routes' ``redact`` pointers name are replaced by :data:`MARKER` or
by their keyed hash (:func:`keyed_hash`), and the payload row holds the result. The same
keyed hash names a delivery's data subject (``subject``), so ``hookinbox erase`` finds a
person's deliveries from the value an operator types, and a field hashed by redaction
joins with it. Nothing here reads the config or the environment: the rules come as
pointer strings (checked by :mod:`hookinbox.config.privacy`) and the key as bytes.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

#: What a redacted field holds when it is not hashed.
MARKER = "[redacted]"
#: The header a forward of a redacted payload carries (stored with its kept headers).
REDACTED_HEADER = "x-hookinbox-redacted"
#: Provider signature headers: a forward of a redacted body leaves them out (they sign
#: the original bytes, which no longer travel). Any kept header with ``signature`` or
#: ``hmac`` in its name goes too, and an ``hmac`` source's own signature header.
SIGNATURE_HEADERS = frozenset(
    {
        "webhook-signature",
        "svix-signature",
        "stripe-signature",
        "x-hub-signature",
        "x-hub-signature-256",
        "x-shopify-hmac-sha256",
        "shopify-hmac-sha256",
        "x-slack-signature",
        "x-twilio-signature",
    }
)


def keyed_hash(key: bytes, value: Any) -> str:
    """HMAC-SHA256 of a value under ``key``, in lowercase hex. A string is hashed as its
    UTF-8 text, an integer as its digits (so ``"42"`` and ``42`` agree, as a subject
    read by :func:`hookinbox.payload.string_at` does), anything else as its compact
    JSON with sorted keys."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, int) and not isinstance(value, bool):
        text = str(value)
    else:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # The one-shot C path: about half the cost of hmac.new(...).hexdigest().
    return hmac.digest(key, text.encode("utf-8", "surrogatepass"), "sha256").hex()


def _glob(token: str) -> re.Pattern[str] | None:
    """A token with ``*`` as a pattern over keys (``*`` alone: every key); None for a
    plain key."""
    if "*" not in token:
        return None
    return re.compile(".*".join(re.escape(part) for part in token.split("*")), re.DOTALL)


@dataclass(frozen=True, slots=True)
class _PointerStep:
    key: str
    glob: re.Pattern[str] | None


def _steps(pointer: str) -> tuple[_PointerStep, ...]:
    tokens = [raw.replace("~1", "/").replace("~0", "~") for raw in pointer.split("/")[1:]]
    return tuple(_PointerStep(token, _glob(token)) for token in tokens)


class Redaction:
    """One delivery's rules: ``(pointer, hashed)`` pairs, from its source and routes.

    A field named by a marking rule and a hashing rule ends as the marker (hashes go
    first, markers over them), and a pointer listed twice is applied once."""

    def __init__(self, rules: Iterable[tuple[str, bool]], key: bytes | None = None) -> None:
        modes: dict[str, bool] = {}
        for pointer, hashed in rules:
            modes[pointer] = modes.get(pointer, True) and hashed
        if any(modes.values()) and not key:
            raise ValueError("a hashing redaction needs a key")
        self._key = key or b""
        ordered = sorted(modes.items(), key=lambda item: not item[1])  # hashes first
        self._rules = tuple((_steps(pointer), hashed) for pointer, hashed in ordered)

    def __bool__(self) -> bool:
        return bool(self._rules)

    def apply(self, payload: Mapping[str, Any]) -> dict[str, Any] | None:
        """A copy of ``payload`` with the named fields replaced, or None when no rule
        named a field present (nothing to store differently). ``payload`` itself is not
        changed: only the containers on a redacted path are copied. A field two rules
        name is replaced once (a marker over a hash, never a hash of a hash)."""
        current: Any = payload
        done: dict[tuple[Any, ...], bool] = {}
        for steps, hashed in self._rules:
            current, _ = self._walk(current, steps, 0, hashed, (), done)
        return current if done else None

    def _walk(
        self,
        node: Any,
        steps: tuple[_PointerStep, ...],
        depth: int,
        hashed: bool,
        path: tuple[Any, ...],
        done: dict[tuple[Any, ...], bool],
    ) -> tuple[Any, bool]:
        step = steps[depth]
        last = depth == len(steps) - 1
        keys: Iterable[Any]
        if isinstance(node, dict):
            if step.glob is None:
                keys = (step.key,) if step.key in node else ()
            else:
                keys = [k for k in node if step.glob.fullmatch(k)]
        elif isinstance(node, list):
            if step.key == "*":
                keys = range(len(node))
            elif step.key.isascii() and step.key.isdigit() and int(step.key) < len(node):
                keys = (int(step.key),)
            else:
                keys = ()
        else:
            return node, False
        copy: Any = None
        for key in keys:
            child = node[key]
            where = (*path, key)
            if last:
                if where in done and (hashed or not done[where]):
                    continue  # replaced already: hashed once, or a marker already
                new, hit = (keyed_hash(self._key, child) if hashed else MARKER), True
                done[where] = hashed
            else:
                new, hit = self._walk(child, steps, depth + 1, hashed, where, done)
            if hit:
                if copy is None:
                    copy = dict(node) if isinstance(node, dict) else list(node)
                copy[key] = new
        return (node, False) if copy is None else (copy, True)


def payload_bytes(payload: Mapping[str, Any]) -> bytes:
    """A payload as the JSON bytes a payload row stores: orjson, or the standard library
    for what orjson cannot write (an integer past 64 bits, which the parser kept exact)."""
    try:
        return orjson.dumps(payload)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def without_signatures(
    headers: Mapping[str, str], also: frozenset[str] = frozenset()
) -> dict[str, str]:
    """The kept headers of a redacted delivery: no signature (``also``: a source's own
    signature header), and :data:`REDACTED_HEADER`."""
    kept = {
        name: value
        for name, value in headers.items()
        if name not in SIGNATURE_HEADERS
        and name not in also
        and "signature" not in name
        and "hmac" not in name
    }
    kept[REDACTED_HEADER] = "true"
    return kept
