"""Who may use the admin: a shared token, signed sessions, CSRF tokens, safe redirects.

- ``POST /admin/login`` with the token (``HOOKINBOX_ADMIN_TOKEN``) sets a session cookie
  (HttpOnly, SameSite=Strict, path ``/admin``, Secure over https). The session is
  ``id.expiry.name.mac``, signed with a key derived from the token: every process with
  the same token accepts it, and changing the token ends every session. Nothing of the
  token is in the cookie.
- ``POST /admin/logout`` revokes the session's id (:class:`Revocations`) until its
  expiry, so a copied cookie dies with the logout, not twelve hours later. The admin
  keeps them in the store (:class:`StoreRevocations`), so a logout holds in every
  process and host; :class:`MemoryRevocations` is the in-process alternative.
- Failed logins are rate-limited (:class:`LoginLimiter`): a few per client address per
  minute and a few dozen overall, then 429 with ``Retry-After`` without comparing the
  token at all.
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
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from starlette.requests import Request

if TYPE_CHECKING:
    from hookinbox.store.admin_sessions import AdminSessions

ADMIN_TOKEN_ENV = "HOOKINBOX_ADMIN_TOKEN"
COOKIE = "hookinbox_admin"
SESSION_SECONDS = 12 * 3600
_NAME = re.compile(r"[^A-Za-z0-9_.@-]")
_SESSION_ID = re.compile(r"[0-9a-f]{16}")
#: A session's expiry: unix seconds, ASCII digits (counted before int() runs).
_EXPIRY = re.compile(r"[0-9]{1,12}")


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


class LoginLimiter:
    """Failed logins allowed per client address and overall, in a sliding window.

    In-process: each process counts its own (a client spreading attempts over N
    processes gets N times the budget, still a few hundred guesses an hour against a
    token of 20+ random characters). Addresses are forgotten once their window passes,
    and at most ``max_clients`` are tracked."""

    def __init__(
        self,
        *,
        per_client: int = 5,
        overall: int = 50,
        window_seconds: float = 60.0,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._per_client = per_client
        self._overall = overall
        self._window = window_seconds
        self._max_clients = max_clients
        self._clock = clock
        self._clients: dict[str, deque[float]] = {}
        self._all: deque[float] = deque()

    def _trim(self, times: deque[float], now: float) -> None:
        while times and times[0] <= now - self._window:
            times.popleft()

    def retry_after(self, client: str) -> int:
        """Seconds until ``client`` may try again; 0 when it may now."""
        now = self._clock()
        self._trim(self._all, now)
        times = self._clients.get(client)
        if times is not None:
            self._trim(times, now)
        waits = []
        if len(self._all) >= self._overall:
            waits.append(self._all[0] + self._window - now)
        if times is not None and len(times) >= self._per_client:
            waits.append(times[0] + self._window - now)
        return max(1, int(max(waits)) + 1) if waits else 0

    def failed(self, client: str) -> None:
        now = self._clock()
        self._all.append(now)
        times = self._clients.get(client)
        if times is None:
            if len(self._clients) >= self._max_clients:
                stale = now - self._window
                for key in [k for k, t in self._clients.items() if not t or t[-1] <= stale]:
                    del self._clients[key]
            if len(self._clients) >= self._max_clients:
                self._clients.pop(next(iter(self._clients)))
            times = self._clients[client] = deque()
        times.append(now)


class Sessions:
    """Signed sessions, their revocation and their CSRF tokens."""

    def __init__(self, token: str, revocations: Revocations | None = None) -> None:
        self._token = token.encode()
        self._key = hashlib.sha256(b"hookinbox-admin-session:" + self._token).digest()
        self.revocations: Revocations = revocations or MemoryRevocations()

    def token_matches(self, offered: str) -> bool:
        return hmac.compare_digest(offered.encode(), self._token)

    def _mac(self, message: str) -> str:
        digest = hmac.new(self._key, message.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def issue(self, name: str) -> str:
        body = f"{secrets.token_hex(8)}.{int(time.time()) + SESSION_SECONDS}.{name}"
        return f"{body}.{self._mac(body)}"

    def _parse(self, cookie: str | None) -> tuple[str, int, str] | None:
        """``(session id, expiry, name)`` of a well-formed cookie with a valid MAC."""
        if not cookie or cookie.count(".") != 3:
            return None
        sid, expiry, name, mac = cookie.split(".")
        valid = hmac.compare_digest(mac.encode(), self._mac(f"{sid}.{expiry}.{name}").encode())
        # Signed by us means well-formed by us; checked anyway, never int() of "²".
        if not valid or not _SESSION_ID.fullmatch(sid) or not _EXPIRY.fullmatch(expiry):
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


def client_address(request: Request) -> str:
    return request.client.host if request.client is not None else "-"


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
