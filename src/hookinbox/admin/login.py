"""The admin login: its bounded form reader and its throttle.

``POST /admin/login`` is the one admin path anybody may call, so what it costs before
the token is compared is bounded here.

**The form** (:func:`read_login_form`) is read by this module, not by a general form
parser: ``application/x-www-form-urlencoded`` in UTF-8 only (multipart, or another
charset, is 415 ``unsupported_form``), at most :data:`MAX_LOGIN_FORM_BYTES` (a larger
``Content-Length`` is 413 ``form_too_large`` before a byte of the body is read; a
chunked body is cut there), at most :data:`MAX_LOGIN_FIELDS` fields, each field once;
anything that is not ASCII on the wire, or whose percent-decoding is not UTF-8, is 400
``invalid_form``. The token is compared as bytes, so no text encoding can fail there.

**The throttle** (:class:`LoginLimiter`) counts per client address
(:mod:`hookinbox.http.clients`: the TCP peer, or what a trusted proxy names; an IPv6
address counts as its /64, the block one subscriber gets). An attempt takes its slot
*before* the body is read and the token compared, and gives it back only when the token
was right: concurrent attempts count, and only wrong tokens fill an address's budget.

- Each address may have :attr:`~LoginLimiter.per_client` failed or pending attempts
  in the sliding window (5 a minute); beyond it, 429 with ``Retry-After``, without
  reading the body or comparing the token.
- The process-wide budget (``overall``, 50 failures a minute from all addresses)
  never refuses anybody on its own. Once it is spent, every address's budget shrinks to
  ``under_pressure`` (1): guessing from many addresses slows to one guess per address
  a minute, while an operator with the right token, on an address that has not itself
  just failed, is compared and let in as always. An attacker's failures therefore stop
  only the attacker's own addresses; the operator who mistypes during an attack waits
  at most one window.
- Each process counts on its own (``--processes N`` gives N times the budget), and at
  most ``max_clients`` addresses are remembered (the stalest are forgotten first).
"""

from __future__ import annotations

import hashlib
import ipaddress
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from starlette.requests import Request

from hookinbox.errors import InvalidLoginForm, LoginFormTooLarge, UnsupportedLoginForm

#: The largest login form read (the real one is a few hundred bytes).
MAX_LOGIN_FORM_BYTES = 4096
#: The most fields a login form may have (the real one has three).
MAX_LOGIN_FIELDS = 8
_FORM = "application/x-www-form-urlencoded"
_FIELDS = ("token", "name", "next")


@dataclass(frozen=True, slots=True)
class LoginForm:
    token: bytes
    name: str
    next: str | None

    def __repr__(self) -> str:  # never the token, in a traceback or a log line
        return f"LoginForm(name={self.name!r})"


def _check_content_type(value: str) -> None:
    media, *params = value.split(";")
    if media.strip().lower() != _FORM:
        raise UnsupportedLoginForm()
    for param in params:
        key, _, charset = param.partition("=")
        if key.strip().lower() == "charset" and charset.strip().strip('"').lower() not in (
            "utf-8",
            "utf8",
        ):
            raise UnsupportedLoginForm()


def _text(raw: bytes) -> str:
    try:
        return unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidLoginForm("A field of the login form is not UTF-8.") from None


def parse_login_form(body: bytes) -> LoginForm:
    """The login's fields from an urlencoded body of at most the bound."""
    if not body.isascii():
        raise InvalidLoginForm("The login form holds bytes urlencoding never sends.")
    fields = [field for field in body.split(b"&") if field]
    if len(fields) > MAX_LOGIN_FIELDS:
        raise InvalidLoginForm(f"The login form has more than {MAX_LOGIN_FIELDS} fields.")
    values: dict[str, bytes] = {}
    for field in fields:
        raw_name, _, raw_value = field.partition(b"=")
        name = _text(raw_name)
        if name not in _FIELDS:
            continue
        if name in values:
            raise InvalidLoginForm(f"The login form has the field {name!r} twice.")
        values[name] = unquote_to_bytes(raw_value.replace(b"+", b" "))
        _text(raw_value)  # every field UTF-8, the token too: one rule for all
    following = values.get("next")
    return LoginForm(
        token=values.get("token", b""),
        name=values.get("name", b"").decode("utf-8"),
        next=None if following is None else following.decode("utf-8"),
    )


async def read_login_form(request: Request) -> LoginForm:
    """The login form, read within its bounds (see the module docstring)."""
    _check_content_type(request.headers.get("content-type", ""))
    length = request.headers.get("content-length")
    if length is not None:
        if not (length.isascii() and length.isdigit()):
            raise InvalidLoginForm("The Content-Length is not a number.")
        if int(length) > MAX_LOGIN_FORM_BYTES:
            raise LoginFormTooLarge(f"The login form is larger than {MAX_LOGIN_FORM_BYTES} bytes.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_LOGIN_FORM_BYTES:
            raise LoginFormTooLarge(f"The login form is larger than {MAX_LOGIN_FORM_BYTES} bytes.")
    return parse_login_form(bytes(body))


def token_digest(token: bytes) -> bytes:
    """What a login token is compared as: equal lengths, so the time says nothing of how
    long the right one is."""
    return hashlib.sha256(b"hookinbox-admin-login:" + token).digest()


def throttle_key(address: str) -> str:
    """The key an address is counted under: an IPv6 address as its /64."""
    if ":" not in address:
        return address
    try:
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    except ValueError:
        return address


class _Client:
    __slots__ = ("failures", "pending")

    def __init__(self, per_client: int) -> None:
        self.failures: deque[float] = deque(maxlen=per_client)
        self.pending = 0


class LoginLimiter:
    """Login attempts per client address, and the process-wide pressure that tightens
    them (the module docstring has the rules)."""

    def __init__(
        self,
        *,
        per_client: int = 5,
        under_pressure: int = 1,
        overall: int = 50,
        window_seconds: float = 60.0,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_client = per_client
        self.under_pressure = min(under_pressure, per_client)
        self.overall = overall
        self._window = window_seconds
        self._max_clients = max_clients
        self._clock = clock
        self._clients: dict[str, _Client] = {}
        #: The latest ``overall`` failures: all inside the window means the budget is spent.
        self._all: deque[float] = deque(maxlen=overall)

    def _trim(self, times: deque[float], now: float) -> None:
        while times and times[0] <= now - self._window:
            times.popleft()

    def under_attack(self) -> bool:
        """Whether ``overall`` failures happened within the window."""
        self._trim(self._all, self._clock())
        return len(self._all) >= self.overall

    def take(self, address: str) -> int:
        """Take a slot for one attempt from ``address``: 0 when taken (the caller then
        calls :meth:`succeeded` or :meth:`failed`, exactly once), else the seconds
        until it may try again."""
        now = self._clock()
        key = throttle_key(address)
        client = self._clients.get(key)
        if client is None:
            client = self._remember(key, now)
        self._trim(client.failures, now)
        budget = self.under_pressure if self.under_attack() else self.per_client
        used = len(client.failures) + client.pending
        if used >= budget:
            # The oldest failure that must leave the window before a slot frees up; an
            # address held only by its own attempts in flight waits a second.
            expiring = used - budget
            if expiring < len(client.failures):
                return max(1, int(client.failures[expiring] + self._window - now) + 1)
            return 1
        client.pending += 1
        return 0

    def succeeded(self, address: str) -> None:
        """The attempt had the right token: its slot is given back."""
        client = self._clients.get(throttle_key(address))
        if client is not None and client.pending:
            client.pending -= 1

    def failed(self, address: str) -> None:
        """The attempt did not log in: its slot stays taken for the window."""
        now = self._clock()
        self._all.append(now)
        key = throttle_key(address)
        client = self._clients.get(key) or self._remember(key, now)
        if client.pending:
            client.pending -= 1
        client.failures.append(now)

    def _remember(self, key: str, now: float) -> _Client:
        if len(self._clients) >= self._max_clients:
            stale = now - self._window
            for old in [
                k
                for k, c in self._clients.items()
                if not c.pending and (not c.failures or c.failures[-1] <= stale)
            ]:
                del self._clients[old]
        if len(self._clients) >= self._max_clients:
            self._clients.pop(next(iter(self._clients)))
        client = self._clients[key] = _Client(self.per_client)
        return client


__all__ = [
    "MAX_LOGIN_FIELDS",
    "MAX_LOGIN_FORM_BYTES",
    "LoginForm",
    "LoginLimiter",
    "parse_login_form",
    "read_login_form",
    "throttle_key",
    "token_digest",
]
