"""``[privacy]``, and the redaction and subject keys of sources and routes.

What a source or route may ask (docs/operations/privacy.md)::

    [privacy]
    hash_key_env = "HOOKINBOX_HASH_KEY"   # the key of every keyed hash (the default name)

    [sources.stripe]
    redact = ["/data/object/customer_email", "/data/object/metadata/*"]
    redact_hash = false                   # true: a keyed hash instead of "[redacted]"
    subject = "/data/object/customer"     # whose data it is, for `hookinbox erase`

A redaction pointer is a JSON pointer (RFC 6901) whose tokens may hold ``*``: a token of
``*`` alone is every key of an object (and every item of an array) at that level, a token
with ``*`` among other characters every key it matches as a glob (``card_*``). There is
no recursive glob. The key is read from the environment only when a source needs it
(hashing or a subject), by :meth:`PrivacySettings.hash_key`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from pydantic import Field

from hookinbox.config.fields import Frozen
from hookinbox.errors import ConfigError

#: The variable holding the key unless ``[privacy] hash_key_env`` names another.
DEFAULT_HASH_KEY_ENV = "HOOKINBOX_HASH_KEY"
#: A shorter key is refused: a keyed hash of a guessable value is only as good as its key.
MIN_HASH_KEY_BYTES = 32
#: The most redaction pointers one source or one route may list.
MAX_REDACT_RULES = 64

_TOKEN = re.compile(r"^([^/~]|~[01])*$")


def check_redact_pointer(value: str) -> str:
    """A redaction pointer: ``/a/b``, ``/a/*``, ``/items/*/email``, ``/a/card_*``."""
    if not value.startswith("/"):
        raise ValueError(f"{value!r} is not a JSON pointer to a field (e.g. /data/object/email)")
    for token in value.split("/")[1:]:
        if not _TOKEN.match(token):
            raise ValueError(f"{value!r}: '~' must be written ~0 and '/' ~1 in a JSON pointer")
        if "**" in token:
            raise ValueError(f"{value!r}: '**' is not a glob here ('*' is one level of keys)")
    return value


def check_redact(value: tuple[str, ...]) -> tuple[str, ...]:
    if len(value) > MAX_REDACT_RULES:
        raise ValueError(f"at most {MAX_REDACT_RULES} redaction pointers")
    return tuple(check_redact_pointer(v) for v in value)


class PrivacySettings(Frozen):
    """``[privacy]``: where the key of redaction hashes and subject hashes is."""

    #: The environment variable holding the key (at least 32 bytes; random, kept secret:
    #: whoever has it can test a guessed value against a stored hash).
    hash_key_env: str = Field(
        default=DEFAULT_HASH_KEY_ENV, min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$"
    )

    def hash_key(self, environ: Mapping[str, str] | None = None) -> bytes:
        """The key, read from the environment now; a ConfigError naming the variable
        (never its value) when it is unset or too short."""
        raw = (os.environ if environ is None else environ).get(self.hash_key_env, "")
        key = raw.strip().encode("utf-8")
        if not key:
            raise ConfigError(
                f"privacy.hash_key_env: environment variable {self.hash_key_env} is not set "
                "or empty (redact_hash and subject need it)"
            )
        if len(key) < MIN_HASH_KEY_BYTES:
            raise ConfigError(
                f"privacy.hash_key_env: the key in {self.hash_key_env} needs at least "
                f"{MIN_HASH_KEY_BYTES} bytes"
            )
        return key
