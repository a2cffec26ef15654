"""The edge: what a delivery must be before anything of it reaches the store.

Whatever is accepted must be storable (by both stores), forwardable (as HTTP headers)
and loggable, so it is checked here, once per delivery and before any store work; what
fails is a 400 with its own code. The contract is docs/edge.md:

- the body follows the rules of :func:`hookinbox.payload.parse_json_object`, which
  the verifier applies as it parses the body, once the signature holds;
- the event id and the event type are text of at most :data:`MAX_TEXT_BYTES` UTF-8
  bytes with no control character (U+0000-U+001F, U+007F-U+009F) and no lone surrogate
  -- else ``invalid_event_id`` / ``invalid_event_type`` (:func:`check_event`);
- the provider headers kept with a delivery (:func:`kept_headers`: the content type and
  the scheme's own prefixes, the ones a forward passes on) are at most
  :data:`MAX_KEPT_HEADERS`, each value at most :data:`MAX_HEADER_VALUE_BYTES`, all of
  them at most :data:`MAX_KEPT_HEADER_BYTES`, and hold no control character but a tab
  -- else ``invalid_headers``.

The receiver calls :func:`check_event` then :func:`kept_headers` right after the
verifier, so an id that is also a header (``webhook-id``) is refused as an id.

Header values arrive as bytes; like Starlette, hookinbox reads them as ISO-8859-1, so an
id or a type taken from a header is that reading of its bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from hookinbox.errors import InvalidEventId, InvalidEventType, InvalidHeaders
from hookinbox.verify.base import VerifiedEvent

#: The longest event id or type, in UTF-8 bytes: PostgreSQL's unique index holds far
#: more (about 2,700), but a log line or a header should not carry more than this.
MAX_TEXT_BYTES = 255
#: The most provider headers kept with one delivery (a provider sends about ten).
MAX_KEPT_HEADERS = 32
#: The longest value of one kept header, in bytes (a few rotated signatures fit easily).
MAX_HEADER_VALUE_BYTES = 4096
#: All kept headers, names and values, in bytes.
MAX_KEPT_HEADER_BYTES = 16384

#: Headers a forward passes on: the content type and the provider's own headers. Never
#: Authorization or cookies.
KEPT_HEADER_PREFIXES = (
    "webhook-",
    "svix-",
    "stripe-",
    "x-github-",
    "x-hub-signature",
    "x-shopify-",
    "shopify-",
    "x-slack-",
    "x-twilio-",
    "i-twilio-",
)

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_HEADER_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f]")


def is_kept_header(name: str) -> bool:
    """Whether a header (lower-cased) is one kept with a delivery."""
    return name == "content-type" or name.startswith(KEPT_HEADER_PREFIXES)


def kept_headers(
    headers: Mapping[str, str],
    also: frozenset[str] = frozenset(),
    never: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """The headers stored with a delivery and passed on by a forward, checked; an
    :class:`~hookinbox.errors.InvalidHeaders` when they are not what docs/edge.md says.
    ``also``: the source's own signature headers (an ``hmac`` source's, lower-case);
    ``never``: credential headers, left out even under a kept prefix."""
    kept = {
        k: v
        for k, v in headers.items()
        if (k.startswith(KEPT_HEADER_PREFIXES) or k in also) and k not in never
    }
    if "content-type" in headers:
        kept["content-type"] = headers["content-type"]
    if len(kept) > MAX_KEPT_HEADERS:
        raise InvalidHeaders(f"More than {MAX_KEPT_HEADERS} provider headers.")
    # Values are ISO-8859-1 text (one character per byte), so len() counts bytes.
    values = "".join(kept.values())
    if kept and max(map(len, kept.values())) > MAX_HEADER_VALUE_BYTES:
        raise InvalidHeaders(f"A provider header is longer than {MAX_HEADER_VALUE_BYTES}.")
    if len(values) + sum(map(len, kept)) > MAX_KEPT_HEADER_BYTES:
        raise InvalidHeaders(f"The provider headers are longer than {MAX_KEPT_HEADER_BYTES}.")
    if not values.isprintable() and _HEADER_CONTROL.search(values):
        raise InvalidHeaders("A provider header holds a control character.")
    return kept


def storable_text(value: str, *, max_bytes: int = MAX_TEXT_BYTES) -> bool:
    """Whether ``value`` is text both stores hold and a header or a log line can carry:
    at most ``max_bytes`` in UTF-8, no control character, no lone surrogate."""
    if value.isascii():  # the common case: no encoding needed to count the bytes
        return len(value) <= max_bytes and value.isprintable()
    if len(value) > max_bytes or _CONTROL.search(value):
        return False
    try:
        return len(value.encode("utf-8")) <= max_bytes
    except UnicodeEncodeError:  # a lone surrogate
        return False


def check_event(event: VerifiedEvent) -> VerifiedEvent:
    """``event`` if its id and type are storable text, else the refusal."""
    if not storable_text(event.event_id):
        raise InvalidEventId()
    if event.event_type and not storable_text(event.event_type):
        raise InvalidEventType()
    return event


__all__ = [
    "KEPT_HEADER_PREFIXES",
    "MAX_HEADER_VALUE_BYTES",
    "MAX_KEPT_HEADERS",
    "MAX_KEPT_HEADER_BYTES",
    "MAX_TEXT_BYTES",
    "check_event",
    "is_kept_header",
    "kept_headers",
    "storable_text",
]
