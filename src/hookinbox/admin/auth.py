"""Who may use the admin: a shared token, signed sessions, CSRF tokens, safe redirects.

- ``POST /admin/login`` with the token (``HOOKINBOX_ADMIN_TOKEN``) sets a session cookie
  (HttpOnly, SameSite=Strict, path ``/admin``, Secure over https). The session is
  ``id.expiry.name.mac``, signed with a key derived from the token: every process with
  the same token accepts it, and changing the token ends every session. Nothing of the
  token is in the cookie. The name may hold dots (an e-mail address): the id, the expiry
  and the MAC never do, so the cookie is read from both ends.
- The token has at least :data:`MIN_ADMIN_TOKEN_LENGTH` characters; a shorter one stops
  the start-up (:func:`admin_token`).
- ``POST /admin/logout`` revokes the session's id (:class:`Revocations`) until its
  expiry, so a copied cookie dies with the logout, not twelve hours later. The admin
  keeps them in the store (:class:`StoreRevocations`), so a logout holds in every
  process and host; :class:`MemoryRevocations` is the in-process alternative.
- The login form and its throttle are :mod:`hookinbox.admin.login`: a bounded reader of
  a small urlencoded form, and a per-address budget that only wrong tokens fill.
- Every state-changing action is a POST carrying a CSRF token derived from the session
  (a per-session HMAC); a GET never changes anything. An action that ran answers 303 to
  a GET page (post/redirect/get), with its outcome as a flash message signed for the
  session (:meth:`Sessions.sign`), so a reload never repeats it and nobody can craft a
  link that shows a false one.
- Every response carries a strict Content-Security-Policy (scripts only with the page's
  nonce), no framing, no referrer, no caching.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from starlette.requests import Request

from hookinbox.admin.login import token_digest
from hookinbox.errors import ConfigError

if TYPE_CHECKING:
    from hookinbox.store.admin_sessions import AdminSessions

ADMIN_TOKEN_ENV = "HOOKINBOX_ADMIN_TOKEN"
#: A shorter admin token is refused at start-up.
MIN_ADMIN_TOKEN_LENGTH = 32
COOKIE = "hookinbox_admin"
SESSION_SECONDS = 12 * 3600
_NAME = re.compile(r"[^A-Za-z0-9_.@-]")
#: A name as :func:`clean_name` leaves it.
_CLEAN_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,40}")
_SESSION_ID = re.compile(r"[0-9a-f]{16}")
#: A session's expiry: unix seconds, ASCII digits (counted before int() runs).
_EXPIRY = re.compile(r"[0-9]{1,12}")


def admin_token(environ: Mapping[str, str]) -> str | None:
    """The admin token of ``environ``, None when the admin is off; ConfigError naming the
    variable when it is too short to be out of a guesser's reach."""
    token = environ.get(ADMIN_TOKEN_ENV, "")
    if not token:
        return None
    if len(token) < MIN_ADMIN_TOKEN_LENGTH:
        raise ConfigError(
            f"{ADMIN_TOKEN_ENV}: the admin token needs {MIN_ADMIN_TOKEN_LENGTH}+ characters "
            "(e.g. openssl rand -hex 32)"
        )
    return token


def clean_name(value: object) -> str:
    """The name typed at login, reduced to what is safe in an audit line."""
    return _NAME.sub("", str(value or ""))[:40] or "operator"


class Revocations(Protocol):
    """Session ids ended by a logout, each until its session would have expired."""

    async def revoke(self, sid: str, until: float) -> None:
        """End session ``sid``; it need not be remembered after ``until`` (unix seconds)."""
        ...

    async def is_revoked(self, sid: str) -> bool:
        """Whether ``sid`` was revoked."""
        ...


class StoreRevocations:
    """Revocations in the store's ``admin_sessions_revoked`` table: one primary-key
    lookup per admin request, and a logout in one process holds in all of them."""

    def __init__(self, sessions: AdminSessions, clock: Callable[[], float] = time.time) -> None:
        self._sessions = sessions
        self._clock = clock

    async def revoke(self, sid: str, until: float) -> None:
        await self._sessions.revoke(sid, until - self._clock())

    async def is_revoked(self, sid: str) -> bool:
        return await self._sessions.is_revoked(sid)


class MemoryRevocations:
    """Revocations in this process's memory: they hold for every request this process
    serves, and are lost on restart (for an admin on a store of its own, or tests)."""

    def __init__(
        self, *, max_entries: int = 10_000, clock: Callable[[], float] = time.time
    ) -> None:
        self._until: dict[str, float] = {}
        self._max = max_entries
        self._clock = clock

    async def revoke(self, sid: str, until: float) -> None:
        now = self._clock()
        if len(self._until) >= self._max:
            self._until = {s: u for s, u in self._until.items() if u > now}
        if len(self._until) >= self._max:
            # Full of live revocations (only logged-in operators add them): the one
            # closest to its end goes first, so the newest logout always holds.
            del self._until[min(self._until, key=self._until.__getitem__)]
        self._until[sid] = until

    async def is_revoked(self, sid: str) -> bool:
        until = self._until.get(sid)
        return until is not None and until > self._clock()


class Sessions:
    """Signed sessions, their revocation and their CSRF tokens."""

    def __init__(self, token: str, revocations: Revocations | None = None) -> None:
        self._token = token.encode()
        self._key = hashlib.sha256(b"hookinbox-admin-session:" + self._token).digest()
        self._token_digest = token_digest(self._token)
        self.revocations: Revocations = revocations or MemoryRevocations()

    def token_matches(self, offered: bytes) -> bool:
        """Whether ``offered`` (the bytes the form carried) is the token, compared as
        digests in constant time."""
        return hmac.compare_digest(token_digest(offered), self._token_digest)

    def _mac(self, message: str) -> str:
        digest = hmac.new(self._key, message.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def issue(self, name: str) -> str:
        body = f"{secrets.token_hex(8)}.{int(time.time()) + SESSION_SECONDS}.{name}"
        return f"{body}.{self._mac(body)}"

    def _parse(self, cookie: str | None) -> tuple[str, int, str] | None:
        """``(session id, expiry, name)`` of a well-formed cookie with a valid MAC."""
        if not cookie or cookie.count(".") < 3 or not cookie.isascii():
            return None
        sid, expiry, rest = cookie.split(".", 2)
        name, _, mac = rest.rpartition(".")
        valid = hmac.compare_digest(mac.encode(), self._mac(f"{sid}.{expiry}.{name}").encode())
        # Signed by us means well-formed by us; checked anyway, never int() of "²".
        if (
            not valid
            or not _SESSION_ID.fullmatch(sid)
            or not _EXPIRY.fullmatch(expiry)
            or not _CLEAN_NAME.fullmatch(name)
        ):
            return None
        return sid, int(expiry), name

    async def check(self, cookie: str | None) -> tuple[str, str] | None:
        """``(session id, name)`` of a valid, unexpired, unrevoked session."""
        parsed = self._parse(cookie)
        if parsed is None:
            return None
        sid, expiry, name = parsed
        if expiry < time.time() or await self.revocations.is_revoked(sid):
            return None
        return sid, name

    async def revoke(self, cookie: str | None) -> None:
        """End the session of ``cookie`` (a logout)."""
        parsed = self._parse(cookie)
        if parsed is not None:
            await self.revocations.revoke(parsed[0], parsed[1])

    def csrf(self, sid: str) -> str:
        return self._mac("csrf:" + sid)

    def csrf_matches(self, sid: str, offered: str) -> bool:
        return hmac.compare_digest(offered.encode(), self.csrf(sid).encode())

    def sign(self, sid: str, purpose: str, value: str) -> str:
        """A MAC over ``value`` for this session and purpose: what an action's redirect
        carries in its query string (a flash message, a payload grant), so that a link
        crafted by someone else shows nothing and a copied one dies with the session."""
        return self._mac(f"{purpose}:{sid}:{value}")

    def signed(self, sid: str, purpose: str, value: str, mac: str) -> bool:
        return hmac.compare_digest(mac.encode(), self.sign(sid, purpose, value).encode())


def base_path(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


def safe_next(request: Request, value: object = None) -> str:
    """A path inside the admin to go to after login; anything else goes to the overview."""
    target = str(value if value is not None else request.query_params.get("next", ""))
    base = base_path(request)
    if base and target.startswith(base + "/") and "//" not in target and "\\" not in target:
        return target[len(base) :]
    return "/"


def security_headers(nonce: str) -> dict[str, str]:
    return {
        "content-security-policy": (
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
            f"script-src 'nonce-{nonce}'; form-action 'self'; frame-ancestors 'none'; "
            "base-uri 'none'"
        ),
        "x-frame-options": "DENY",
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
        "cache-control": "no-store",
    }
