"""Who may use the admin: a shared token, signed sessions, CSRF tokens, safe redirects.

- ``POST /admin/login`` with the token (``HOOKINBOX_ADMIN_TOKEN``) sets a session cookie
  (HttpOnly, SameSite=Strict, path ``/admin``, Secure over https). The session is
  ``id.expiry.name.mac``, signed with a key derived from the token: every process with
  the same token accepts it, and changing the token ends every session. Nothing of the
  token is in the cookie.
- Every state-changing action is a POST carrying a CSRF token derived from the session
  (a per-session HMAC); a GET never changes anything.
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

from starlette.requests import Request

ADMIN_TOKEN_ENV = "HOOKINBOX_ADMIN_TOKEN"
COOKIE = "hookinbox_admin"
SESSION_SECONDS = 12 * 3600
_NAME = re.compile(r"[^A-Za-z0-9_.@-]")


def clean_name(value: object) -> str:
    """The name typed at login, reduced to what is safe in an audit line."""
    return _NAME.sub("", str(value or ""))[:40] or "operator"


class Sessions:
    """Signed, stateless sessions and their CSRF tokens."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()
        self._key = hashlib.sha256(b"hookinbox-admin-session:" + self._token).digest()

    def token_matches(self, offered: str) -> bool:
        return hmac.compare_digest(offered.encode(), self._token)

    def _mac(self, message: str) -> str:
        digest = hmac.new(self._key, message.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def issue(self, name: str) -> str:
        body = f"{secrets.token_hex(8)}.{int(time.time()) + SESSION_SECONDS}.{name}"
        return f"{body}.{self._mac(body)}"

    def check(self, cookie: str | None) -> tuple[str, str] | None:
        """``(session id, name)`` of a valid, unexpired session."""
        if not cookie or cookie.count(".") != 3:
            return None
        sid, expiry, name, mac = cookie.split(".")
        if not hmac.compare_digest(mac.encode(), self._mac(f"{sid}.{expiry}.{name}").encode()):
            return None
        if not expiry.isdigit() or int(expiry) < time.time():
            return None
        return sid, name

    def csrf(self, sid: str) -> str:
        return self._mac("csrf:" + sid)

    def csrf_matches(self, sid: str, offered: str) -> bool:
        return hmac.compare_digest(offered.encode(), self.csrf(sid).encode())


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
