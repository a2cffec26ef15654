"""Bearer tokens of the JSON API, and the scopes they carry.

Tokens come from the environment, never from the config file (secrets live there):
``HOOKINBOX_API_TOKENS`` holds entries ``NAME:SCOPES:TOKEN`` separated by commas or
whitespace, ``SCOPES`` being ``read``, ``operate``, ``erase`` or several joined by ``+``
(``operate`` includes ``read``; ``erase``, a data subject's erasure, is given only by
name: no other scope includes it, and it includes no other). The name is the actor of
every change the token makes (``api:NAME``). A token is compared in constant time
against every configured one (no early exit), so the time of an answer says nothing
about how much of a token was right; only its name is ever logged.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from hookinbox.errors import ConfigError

TOKENS_ENV = "HOOKINBOX_API_TOKENS"
Scope = Literal["read", "operate", "erase"]
SCOPES: tuple[Scope, ...] = ("read", "operate", "erase")
#: A shorter token is refused at start-up: it could be guessed.
MIN_TOKEN_LENGTH = 32
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass(frozen=True, slots=True)
class ApiToken:
    name: str
    scopes: frozenset[Scope]
    digest: bytes  # sha256 of the token: the token itself is not kept

    def allows(self, scope: Scope) -> bool:
        return scope in self.scopes or (scope == "read" and "operate" in self.scopes)

    def __repr__(self) -> str:  # never the digest, in a traceback or a log line
        return f"ApiToken({self.name!r}, {sorted(self.scopes)})"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def parse_tokens(text: str) -> tuple[ApiToken, ...]:
    """The tokens of ``HOOKINBOX_API_TOKENS``; ConfigError naming the entry's position
    (never its text, which holds the token) when one is not ``NAME:SCOPES:TOKEN``."""
    tokens: list[ApiToken] = []
    for number, entry in enumerate(re.split(r"[\s,]+", text.strip()), start=1):
        if not entry:
            continue
        name, _, rest = entry.partition(":")
        scopes_text, _, token = rest.partition(":")
        scopes = frozenset(scopes_text.split("+"))
        where = f"{TOKENS_ENV} entry {number}"
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{where}: write NAME:SCOPES:TOKEN (a name of letters and digits)")
        if not scopes or not scopes <= set(SCOPES):
            raise ConfigError(
                f"{where} ({name}): scopes are read, operate, erase or several joined by +"
            )
        if len(token) < MIN_TOKEN_LENGTH:
            raise ConfigError(f"{where} ({name}): the token needs {MIN_TOKEN_LENGTH}+ characters")
        if any(t.name == name for t in tokens):
            raise ConfigError(f"{where}: the name {name!r} is used twice")
        tokens.append(ApiToken(name, scopes, _digest(token)))
    return tuple(tokens)


def tokens_from(environ: Mapping[str, str]) -> tuple[ApiToken, ...]:
    return parse_tokens(environ.get(TOKENS_ENV, ""))


def find_token(tokens: tuple[ApiToken, ...], authorization: str | None) -> ApiToken | None:
    """The token an ``Authorization: Bearer ...`` header names, or None."""
    if not authorization:
        return None
    kind, _, presented = authorization.partition(" ")
    if kind.lower() != "bearer" or not presented.strip():
        return None
    digest = _digest(presented.strip())
    found = None
    for token in tokens:  # every token compared: no early exit
        if hmac.compare_digest(token.digest, digest):
            found = token
    return found
