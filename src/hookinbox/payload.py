"""A delivery's body as data: the JSON object (or form) it must be, and JSON pointers into it.

The receiver parses a body once its signature holds; the worker parses the stored body
again for a handler; resource routes and fingerprints read fields by JSON pointer
(RFC 6901). One parser and one pointer reader serve them all, so a body the receiver
accepted is one the worker can read.

What a body must be (the contract in docs/edge.md): a JSON object per RFC 8259, as
UTF-8 with no byte order mark (so no UTF-16 or UTF-32 either), with no ``NaN`` or
``Infinity``, no lone surrogate and no U+0000 in any string (neither store can hold
them as text, nor can PostgreSQL's jsonb downstream), numbers within range (an integer
of at most :data:`MAX_INTEGER_DIGITS` digits, a number a double can hold), and arrays
and objects nested at most :data:`MAX_DEPTH` deep. A repeated key keeps its last value,
as in orjson, the standard library, JavaScript and Go.

orjson parses almost every body. It turns an integer past 64 bits into a float (older
versions refused it), so a body with a run of 20 digits or more (19 after a minus) --
where such an integer can be -- goes to the standard parser instead, which keeps
integers exact; so does a body orjson refuses, to name what is wrong. That path is
bounded: its depth is checked on the bytes before it recurses, its integers are bounded
in digits before ``int()`` runs, and the body by the source's ``max_body_bytes``.

A source may also take forms (``application/x-www-form-urlencoded``: Twilio, Slack's
interactivity and slash commands): :func:`parse_form` reads one into a dict of strings
(a repeated field into a list), with a field that holds JSON (Slack's ``payload=``)
parsed by the JSON rules above. :class:`BodyFormat` says which a source's body is, from
its config and the delivery's Content-Type, the same way for the receiver and the worker.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Literal
from urllib.parse import parse_qsl

import orjson

from hookinbox.errors import BodyTooDeep, MalformedForm, MalformedJson, NulInBody, NumberOutOfRange

#: The deepest nesting of arrays and objects a body may have (serde_json's default;
#: providers' payloads nest about ten deep). Far below Python's recursion limit, so a
#: handler may walk a payload recursively.
MAX_DEPTH = 128
#: The most digits an integer may have: a 256-bit value has 78.
MAX_INTEGER_DIGITS = 100

_BOM = b"\xef\xbb\xbf"
#: One pass over the body classifies its bytes: a digit -> "0", "-" kept, "[" and "{" ->
#: "[", anything else -> " ". Then 20 digits in a row, or "-" and 19, is where an integer
#: past 64 bits can be (2**64 has 20 digits, -2**63 has 19), and the "[" count bounds the
#: depth -- all at C speed. (A string of that many digits, or with brackets, only sends
#: the body the longer way; no harm.)
_CLASSES = bytes(
    0x30 if 0x30 <= b <= 0x39 else b if b == 0x2D else 0x5B if b in b"[{" else 0x20
    for b in range(256)
)
_LONG_RUN = b"0" * 20
_LONG_NEGATIVE_RUN = b"-" + b"0" * 19
#: Quotes and brackets only, "{}" read as "[]": nesting is the same whatever the kind.
_MARKS = bytes.maketrans(b"{}", b"[]")
_NOT_MARKS = bytes(b for b in range(256) if b not in b'"[]{}')
_STEP = [0] * 256
_STEP[0x5B] = 1
_STEP[0x5D] = -1
#: ``\u0000`` after an even number of backslashes (so not an escaped backslash + text).
_NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def parse_json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or a :class:`~hookinbox.errors.MalformedJson` (or one of
    its precise kinds: ``body_too_deep``, ``number_out_of_range``, ``nul_in_body``)."""
    payload: Any
    classes = body.translate(_CLASSES)
    if _LONG_RUN in classes or _LONG_NEGATIVE_RUN in classes:
        payload = _parse_exact(body)
    else:
        try:
            payload = orjson.loads(body)  # several times faster, on the hot path
        except orjson.JSONDecodeError:
            payload = _parse_exact(body)  # to say precisely what is wrong, or accept
        else:
            # orjson allows 1024 levels; a body with fewer brackets than the limit is
            # within it without looking further (the common case).
            if classes.count(b"[") > MAX_DEPTH:
                _check_depth(body)
    if not isinstance(payload, dict):
        raise MalformedJson("The body is a JSON value but not an object.")
    # A lone backslash is found at memchr speed; most bodies have none.
    if b"\\" in body and b"\\u0000" in body and _NUL_ESCAPE.search(body):
        raise NulInBody()
    return payload


def _check_depth(body: bytes) -> None:
    """BodyTooDeep when arrays and objects nest deeper than :data:`MAX_DEPTH`, measured on
    the bytes: strings taken out (escaped quotes first), then the innermost pairs peeled
    off a level at a time while that takes off much (a shallow body is done in a few
    passes), then the rest counted in chunks, so a flood of brackets stops at the first."""
    if b"\\" in body:
        body = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = body.translate(_MARKS, _NOT_MARKS)
    # Strings without brackets are now '""': gone in one pass. Left to right, that takes
    # each string's two quotes together, so no quote left means none held a bracket.
    skeleton = marks.replace(b'""', b"")
    if b'"' in skeleton:
        skeleton = b"".join(marks.split(b'"')[::2])
    allowed = MAX_DEPTH
    while skeleton:
        peeled = skeleton.replace(b"[]", b"")
        if len(peeled) * 4 > len(skeleton) * 3:
            break  # a long chain: count it instead
        skeleton = peeled
        allowed -= 1
    if allowed < 0:  # peeled away entirely, but in more passes than the limit
        raise BodyTooDeep()
    level = 0
    for start in range(0, len(skeleton), 4096):
        levels = list(accumulate(map(_STEP.__getitem__, skeleton[start : start + 4096])))
        if level + max(levels) > allowed:
            raise BodyTooDeep()
        level += levels[-1]


def _refuse_constant(name: str) -> Any:
    raise MalformedJson(f"{name} is not JSON (RFC 8259).")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise NumberOutOfRange()
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NumberOutOfRange()
    return value


def _parse_exact(body: bytes) -> Any:
    """The standard parser, strict and bounded: UTF-8 only, no BOM, no constants."""
    if body.startswith(_BOM):
        raise MalformedJson("The body starts with a byte order mark (RFC 8259 section 8.1).")
    try:
        text = body.decode("utf-8")  # never the UTF-16/32 detection of json.loads(bytes)
    except UnicodeDecodeError:
        raise MalformedJson("The body is not UTF-8.") from None
    _check_depth(body)  # before the parser recurses
    try:
        payload = json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_int=_bounded_int,
            parse_float=_finite_float,
        )
    except MalformedJson:
        raise
    except (ValueError, RecursionError):
        raise MalformedJson() from None
    if _SURROGATE_ESCAPE.search(text):
        # Paired surrogates are fine; a lone one is no text a store can hold.
        try:
            json.dumps(payload, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise MalformedJson("A string in the body holds a lone surrogate.") from None
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
        elif isinstance(value, list) and token.isascii() and token.isdigit():
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


#: The Content-Type of a form body.
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"
#: The most fields a form may have (a Twilio callback has about 30).
MAX_FORM_FIELDS = 1000

BodyKind = Literal["json", "form", "auto"]


def is_form_content_type(content_type: str | None) -> bool:
    """``application/x-www-form-urlencoded``, whatever its case and parameters."""
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() == FORM_CONTENT_TYPE


@dataclass(frozen=True, slots=True)
class BodyFormat:
    """How a source's bodies are read: ``json`` (every body a JSON object), ``form`` (every
    body a form) or ``auto`` (a form when the Content-Type says so, else JSON).
    ``json_fields``: form fields whose value is JSON (Slack's ``payload``)."""

    kind: BodyKind = "json"
    json_fields: tuple[str, ...] = ()

    def is_form(self, content_type: str | None) -> bool:
        if self.kind == "auto":
            return is_form_content_type(content_type)
        return self.kind == "form"

    def parse(self, body: bytes, content_type: str | None) -> dict[str, Any]:
        """The body as a dict, by the edge's rules for its kind."""
        if self.is_form(content_type):
            return parse_form(body, json_fields=self.json_fields)
        return parse_json_object(body)


#: What every source reads unless its config says otherwise.
JSON_BODY = BodyFormat()


def parse_form(body: bytes, *, json_fields: tuple[str, ...] = ()) -> dict[str, Any]:
    """A form body as ``{name: value}`` (a repeated name: a list of its values, in order).

    The bytes must be ASCII (anything else travels percent-encoded) and decode to UTF-8;
    at most :data:`MAX_FORM_FIELDS` fields; no U+0000 in a name or value (no store can
    hold it) -- else :class:`~hookinbox.errors.MalformedForm` or ``nul_in_body``. A field
    named in ``json_fields`` holds a JSON object, parsed by :func:`parse_json_object`.
    """
    if not body.isascii():
        raise MalformedForm("A form body is ASCII; other bytes travel percent-encoded.")
    try:
        pairs = parse_qsl(
            body.decode("ascii"),
            keep_blank_values=True,
            encoding="utf-8",
            errors="strict",
            max_num_fields=MAX_FORM_FIELDS,
        )
    except UnicodeDecodeError:
        raise MalformedForm("A form field is not percent-encoded UTF-8.") from None
    except ValueError:
        raise MalformedForm(f"A form has at most {MAX_FORM_FIELDS} fields.") from None
    form: dict[str, Any] = {}
    for name, value in pairs:
        if "\x00" in name or "\x00" in value:
            raise NulInBody()
        if name not in form:
            form[name] = value
        elif isinstance(form[name], list):
            form[name].append(value)
        else:
            form[name] = [form[name], value]
    for name in json_fields:
        if isinstance(form.get(name), str):
            form[name] = parse_json_object(form[name].encode("utf-8"))
    return form
