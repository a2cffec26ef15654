"""The body rules (docs/edge.md): strict UTF-8 JSON, bounded numbers and depth, text both
stores can hold. Each failure test breaks exactly one thing of a body that is otherwise
accepted."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookinbox import payload as payload_module
from hookinbox.errors import BodyTooDeep, MalformedJson, NulInBody, NumberOutOfRange
from hookinbox.payload import MAX_DEPTH, MAX_INTEGER_DIGITS, parse_json_object

GOOD = b'{"type": "crm.lead.created", "data": {"n": 1}}'
#: A 20-digit number sends a body down the exact (standard library) path.
EXACT = b'"big": 12345678901234567890, '


def nested(depth: int, *, exact: bool = False) -> bytes:
    """An object whose arrays and objects nest ``depth`` deep in all."""
    inner = b"[" * (depth - 1) + b"]" * (depth - 1)
    return b"{" + (EXACT if exact else b"") + b'"a": ' + inner + b"}"


def test_a_plain_event_is_accepted() -> None:
    assert parse_json_object(GOOD) == {"type": "crm.lead.created", "data": {"n": 1}}


def test_a_utf8_byte_order_mark_is_malformed_json() -> None:
    with pytest.raises(MalformedJson) as refused:
        parse_json_object(b"\xef\xbb\xbf" + GOOD)
    assert refused.value.code == "malformed_json"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le"])
def test_a_utf16_or_utf32_body_is_malformed_json(encoding: str) -> None:
    with pytest.raises(MalformedJson) as refused:
        parse_json_object(GOOD.decode().encode(encoding))
    assert refused.value.code == "malformed_json"


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
@pytest.mark.parametrize("exact", [False, True])
def test_nan_and_infinity_are_malformed_json(constant: bytes, exact: bool) -> None:
    body = b"{" + (EXACT if exact else b"") + b'"n": ' + constant + b"}"
    with pytest.raises(MalformedJson) as refused:
        parse_json_object(body)
    assert refused.value.code == "malformed_json"


@pytest.mark.parametrize("number", [b"1e400", b"-1e400", b"1" + b"0" * 400 + b".0"])
def test_a_number_beyond_a_double_is_out_of_range(number: bytes) -> None:
    with pytest.raises(NumberOutOfRange) as refused:
        parse_json_object(b'{"n": ' + number + b"}")
    assert refused.value.code == "number_out_of_range"


def test_an_integer_of_101_digits_is_out_of_range_and_one_of_100_is_kept_exactly() -> None:
    kept = "9" * MAX_INTEGER_DIGITS
    assert parse_json_object(f'{{"n": -{kept}}}'.encode()) == {"n": -int(kept)}
    with pytest.raises(NumberOutOfRange):
        parse_json_object(f'{{"n": {kept}9}}'.encode())


def test_an_integer_of_5000_digits_is_refused_before_int_runs() -> None:
    # Past Python's own 4,300-digit limit: refused by the digit count, as out of range.
    with pytest.raises(NumberOutOfRange):
        parse_json_object(b'{"n": ' + b"7" * 5000 + b"}")


@pytest.mark.parametrize(
    "number", [2**64, 2**64 - 1, -(2**63) - 1, 12345678901234567890123456789, -(10**30)]
)
def test_integers_past_64_bits_are_kept_exact(number: int) -> None:
    found = parse_json_object(f'{{"id": {number}}}'.encode())["id"]
    assert type(found) is int and found == number


@pytest.mark.parametrize("exact", [False, True])
def test_a_body_nested_to_the_limit_is_accepted_and_one_level_more_is_too_deep(
    exact: bool,
) -> None:
    assert parse_json_object(nested(MAX_DEPTH, exact=exact))["a"] is not None
    with pytest.raises(BodyTooDeep) as refused:
        parse_json_object(nested(MAX_DEPTH + 1, exact=exact))
    assert refused.value.code == "body_too_deep"


@pytest.mark.parametrize("depth", [1025, 2000, 100_000])
def test_a_body_nested_thousands_deep_is_too_deep_without_a_recursion_error(depth: int) -> None:
    # Past orjson's 1,024: it refuses, and the standard parser must not recurse into it.
    with pytest.raises(BodyTooDeep):
        parse_json_object(nested(depth))


def test_brackets_inside_strings_do_not_count_as_depth() -> None:
    body = b'{"a": "' + b"[{" * 5000 + b'\\" [[[" , "b": [[1]]}'
    assert parse_json_object(body)["b"] == [[1]]


def test_many_shallow_containers_are_not_too_deep() -> None:
    body = json.dumps({"items": [{"tags": [1, 2]} for _ in range(5000)]}).encode()
    assert len(parse_json_object(body)["items"]) == 5000


@pytest.mark.parametrize("escape", [b"\\ud800", b"\\udfff", b"\\udc00\\ud800", b"x\\ud83d"])
@pytest.mark.parametrize("exact", [False, True])
def test_a_lone_surrogate_is_malformed_json(escape: bytes, exact: bool) -> None:
    body = b"{" + (EXACT if exact else b"") + b'"type": "' + escape + b'"}'
    with pytest.raises(MalformedJson) as refused:
        parse_json_object(body)
    assert refused.value.code == "malformed_json"


@pytest.mark.parametrize("exact", [False, True])
def test_a_surrogate_pair_is_one_character(exact: bool) -> None:
    body = b"{" + (EXACT if exact else b"") + b'"type": "\\ud83d\\ude00"}'
    assert parse_json_object(body)["type"] == "\U0001f600"


@pytest.mark.parametrize("where", [b'{"type": "a\\u0000b"}', b'{"a\\u0000": 1}'])
def test_an_escaped_nul_anywhere_in_the_body_is_refused(where: bytes) -> None:
    with pytest.raises(NulInBody) as refused:
        parse_json_object(where)
    assert refused.value.code == "nul_in_body"


def test_an_escaped_backslash_before_u0000_is_plain_text() -> None:
    assert parse_json_object(b'{"t": "\\\\u0000"}') == {"t": "\\u0000"}


@pytest.mark.parametrize("exact", [False, True])
def test_a_repeated_key_keeps_its_last_value_on_both_paths(exact: bool) -> None:
    body = b"{" + (EXACT if exact else b"") + b'"type": "first", "type": "last"}'
    assert parse_json_object(body)["type"] == "last"


@pytest.mark.parametrize("body", [b"", b"[1]", b'"text"', b"{", b"\xff\xfe", b'{"a": 1} x'])
def test_what_is_not_one_json_object_is_malformed(body: bytes) -> None:
    with pytest.raises(MalformedJson) as refused:
        parse_json_object(body)
    assert refused.value.code == "malformed_json"


_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)
_JSON: Any = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_TEXT, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None, database=None)
@given(st.dictionaries(_TEXT, _JSON, max_size=6))
def test_orjson_and_the_exact_parser_read_every_accepted_body_alike(value: dict[str, Any]) -> None:
    body = orjson.dumps(value)
    assert parse_json_object(body) == payload_module._parse_exact(body) == value
