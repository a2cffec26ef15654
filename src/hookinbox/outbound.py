"""Outbound HTTP: one POST to an internal service, every failure a short code.

Forwards (a route's ``forward``) and outbox sends (``[outbox] forward``) both go through
:func:`post`, so a target that times out, refuses, does not resolve or answers non-2xx
fails the attempt the same way everywhere: :class:`~hookinbox.errors.ActionError` with
``timeout``, ``connect_error``, ``dns_error``, ``http_error`` or ``http_<status>``, which
the worker or the relay retries with backoff. The code never carries the answer's body.
A failure before anything was sent (no connection, no name) says so (``not_started``):
the effects ledger then releases the forward's key, since no effect can exist.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from hookinbox.codes import JobCode
from hookinbox.errors import ActionError, TargetAnswered

#: The most of a target's answer kept with an attempt (UTF-8 bytes, control chars gone).
SNIPPET_BYTES = 512
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")

#: Left as they are by :func:`header_text`: visible ASCII but ``%``.
_PLAIN = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


def header_text(value: str) -> str:
    """``value`` as a header value any HTTP stack carries: percent-encoded UTF-8
    (RFC 3986 section 2.1) of every character but visible ASCII, and of ``%`` itself, so
    ``urllib.parse.unquote`` or ``decodeURIComponent`` gives ``value`` back exactly.
    ``response.completed`` stays as it is; ``réponse.completed`` is
    ``r%C3%A9ponse.completed``."""
    if value.isascii() and value.isprintable() and " " not in value and "%" not in value:
        return value
    return quote(value, safe=_PLAIN, errors="surrogatepass")


def header_bytes(value: str) -> bytes:
    """A received header value (read as ISO-8859-1, as Starlette does) as the bytes it
    came as, so a forward passes it on unchanged; text beyond ISO-8859-1 (a library
    caller's own headers) percent-encoded as :func:`header_text` does."""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return header_text(value).encode("ascii")


async def post(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str] | Mapping[bytes, bytes],
    timeout: float,
    content: bytes | None = None,
    json: Any = None,
) -> httpx.Response:
    """POST and return the 2xx answer; raise ActionError with the failure's code."""
    try:
        response = await client.post(
            url, content=content, json=json, headers=headers, timeout=timeout
        )
    except (httpx.ConnectTimeout, httpx.PoolTimeout):
        # No connection, so nothing was sent: the effect did not start.
        raise ActionError(JobCode.TIMEOUT, not_started=True) from None
    except httpx.TimeoutException:
        raise ActionError(JobCode.TIMEOUT) from None
    except httpx.ConnectError as exc:
        dns = "name" in str(exc).lower()
        code = JobCode.DNS_ERROR if dns else JobCode.CONNECT_ERROR
        raise ActionError(code, not_started=True) from None
    except httpx.HTTPError as exc:
        raise ActionError(JobCode.HTTP_ERROR, type(exc).__name__) from None
    if not 200 <= response.status_code < 300:
        raise TargetAnswered(
            response.status_code,
            retry_after_seconds=retry_after_seconds(response.headers.get("retry-after")),
            snippet=snippet(response.content),
        )
    return response


def retry_after_seconds(value: str | None, *, now: datetime | None = None) -> float | None:
    """``Retry-After`` (RFC 9110 section 10.2.3) as seconds from now: delta-seconds or an
    HTTP date; None when absent or unreadable (a date in the past is 0)."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(int(text[:12]))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def snippet(body: bytes, limit: int = SNIPPET_BYTES) -> str:
    """The start of a target's answer, fit to show an operator: at most ``limit`` UTF-8
    bytes, control characters (newlines too) folded into one space."""
    text = body[: limit * 2].decode("utf-8", errors="replace")
    text = _CONTROL.sub(" ", text).strip()
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode("utf-8", errors="ignore")


def target_of(url: str) -> str:
    """What an attempt records of a forward URL: host and path, never a query string
    (it may hold a token) nor user info."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return f"{host}{parts.path or '/'}"
