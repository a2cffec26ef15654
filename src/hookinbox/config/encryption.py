"""``[encryption]``: payload bodies, rejected bodies and answer snippets sealed at rest.

Off by default. The keys never appear in the file: ``keys_env`` names the environment
variable holding the key ring, ``ID:BASE64,ID:BASE64`` (each key 32 random bytes); the
first key seals, the others only open what they sealed before (rotation: put a new key
first, run ``hookinbox keys rotate``, then drop the old one)::

    [encryption]
    enabled = true                           # every source, unless it says encrypt = false
    keys_env = "HOOKINBOX_ENCRYPTION_KEYS"

    [sources.stripe]
    encrypt = true                           # this source even when enabled = false

See docs/operations/encryption.md for the format and the threat model.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping

from pydantic import Field

from hookinbox.config.fields import Frozen
from hookinbox.errors import ConfigError

#: The environment variable the key ring is read from unless ``keys_env`` names another.
DEFAULT_KEYS_ENV = "HOOKINBOX_ENCRYPTION_KEYS"
#: Each key-encryption key: AES-256.
KEY_BYTES = 32
_KEY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")

#: A key ring as read from the environment: ``(id, key)`` pairs, the sealing key first.
KeyRingKeys = tuple[tuple[str, bytes], ...]


class EncryptionSettings(Frozen):
    #: Seal every source's bodies and snippets (a source's ``encrypt`` overrides it).
    enabled: bool = False
    #: The environment variable holding the key ring.
    keys_env: str = Field(default=DEFAULT_KEYS_ENV, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")

    def key_ring(self, environ: Mapping[str, str]) -> KeyRingKeys:
        """The ring in ``environ`` (empty when the variable is unset or blank); ConfigError
        naming the variable, never a key, when it is malformed."""
        return parse_key_ring(environ.get(self.keys_env, ""), self.keys_env)


def parse_key_ring(raw: str, variable: str = DEFAULT_KEYS_ENV) -> KeyRingKeys:
    """``k2:BASE64,k1:BASE64`` as ``(id, key)`` pairs, in order. Spaces around entries are
    ignored; ids are unique; each key decodes (standard or URL-safe base64) to 32 bytes."""
    keys: list[tuple[str, bytes]] = []
    for position, entry in enumerate(e.strip() for e in raw.split(",")):
        if not entry:
            if raw.strip():
                raise ConfigError(f"{variable}: entry {position + 1} is empty")
            continue
        key_id, sep, encoded = entry.partition(":")
        key_id = key_id.strip()
        if not sep or not _KEY_ID.match(key_id):
            raise ConfigError(
                f"{variable}: entry {position + 1} must be ID:BASE64 "
                "(an id of letters, digits, '.', '_' or '-', at most 32)"
            )
        if any(key_id == seen for seen, _ in keys):
            raise ConfigError(f"{variable}: key id {key_id!r} appears twice")
        keys.append((key_id, _decode_key(encoded.strip(), key_id, variable)))
    return tuple(keys)


def _decode_key(encoded: str, key_id: str, variable: str) -> bytes:
    try:
        padded = encoded + "=" * (-len(encoded) % 4)
        key = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{variable}: key {key_id!r} is not valid base64") from None
    if len(key) != KEY_BYTES:
        raise ConfigError(
            f"{variable}: key {key_id!r} must be {KEY_BYTES} bytes (base64 of "
            f"{KEY_BYTES} random bytes), not {len(key)}"
        )
    return key
