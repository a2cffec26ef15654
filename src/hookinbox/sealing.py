"""Bodies and answer snippets sealed at rest: envelope encryption with AES-256-GCM.

Each value gets its own random data key; the value is sealed with the data key, and the
data key is wrapped by the ring's current key-encryption key (KEK), whose id travels
with it. Rotation therefore re-wraps 60 bytes per row and never touches the sealed
body (:meth:`Sealer.rewrap`). The row's identity (its delivery id, a rejected body's
source and hash, an attempt's job and number) is the body's associated data, so a
sealed value copied into another row does not open there.

The binary form (``payloads.body``, ``rejected_deliveries.body``)::

    b"\\x00hbx" | version 1 | key id length | key id | wrap nonce (12) | wrapped data key (48)
    | body nonce (12) | sealed body (+16 tag)

A JSON or form body never begins with a NUL byte, so a row written before encryption
was turned on reads as the plaintext it is. A snippet (a text column) is
``"\\x1fhbx:"`` + base64 of the binary form; an answer snippet has its control
characters removed (:func:`hookinbox.outbound.snippet`), so it never begins so either.

The ring is handed in (``[encryption]``, read by the config); nothing here reads the
environment. A value that cannot be opened -- its key is not in the ring, the ring's key
of that id did not seal it, or it is not this row's -- raises
:class:`~hookinbox.errors.KeyUnavailable`, never garbage.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Collection, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from hookinbox.errors import KeyUnavailable

#: What every sealed binary value begins with; never the first bytes of a plaintext body.
MAGIC = b"\x00hbx"
#: What every sealed snippet begins with.
TEXT_PREFIX = "\x1fhbx:"
VERSION = 1
_NONCE = 12
_DATA_KEY = 32
_TAG = 16
_WRAPPED = _DATA_KEY + _TAG
_BODY_AD = MAGIC + bytes([VERSION])


def payload_aad(delivery_id: str) -> bytes:
    """A payload is bound to its delivery."""
    return b"payload\x00" + delivery_id.encode()


def rejected_aad(source: str, body_sha256: str) -> bytes:
    """A rejected body to its (source, body hash): the row's unique key, which the
    upsert of a repeat keeps."""
    return b"rejected\x00" + source.encode() + b"\x00" + body_sha256.encode()


def snippet_aad(job_id: str, number: int) -> bytes:
    """An answer snippet to its attempt: the job and the attempt's number."""
    return b"snippet\x00" + job_id.encode() + b"\x00" + str(number).encode()


def is_sealed(stored: bytes | None) -> bool:
    return stored is not None and stored[:4] == MAGIC


def is_sealed_text(stored: str | None) -> bool:
    return stored is not None and stored.startswith(TEXT_PREFIX)


class Sealer:
    """Seals the values of ``sealed_sources`` with the ring's first key; opens any value
    sealed with a key of the ring, and passes plaintext through. With no keys it seals
    nothing and opens only plaintext (a sealed row then raises KeyUnavailable)."""

    def __init__(
        self, keys: Sequence[tuple[str, bytes]] = (), sealed_sources: Collection[str] = ()
    ) -> None:
        self._keys = {key_id: AESGCM(key) for key_id, key in keys}
        self._heads = {key_id: _head(key_id) for key_id, _ in keys}
        self._current = keys[0][0] if keys else None
        self._sealed = frozenset(sealed_sources)
        if self._sealed and self._current is None:
            raise KeyUnavailable("sources are to be sealed but the key ring is empty")

    @property
    def current_key_id(self) -> str | None:
        """The id of the key that seals (and that rotation re-wraps to)."""
        return self._current

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(self._keys)

    @property
    def has_keys(self) -> bool:
        """Some key can open: sealed rows may exist, and opening them is possible."""
        return bool(self._keys)

    def seals(self, source: str) -> bool:
        return source in self._sealed

    @property
    def seals_any(self) -> bool:
        """Some source is sealed (else writers skip the per-row check)."""
        return bool(self._sealed)

    def seal(self, source: str, body: bytes, aad: bytes) -> bytes:
        """``body`` sealed for the row ``aad`` names when ``source`` is sealed, else
        ``body`` itself."""
        if source not in self._sealed:
            return body
        return self.seal_always(body, aad)

    def seal_always(self, body: bytes, aad: bytes) -> bytes:
        key_id = self._current
        if key_id is None:
            raise KeyUnavailable("the key ring is empty: nothing can be sealed")
        head = self._heads[key_id]
        random = os.urandom(_DATA_KEY + 2 * _NONCE)
        data_key = random[:_DATA_KEY]
        wrap_nonce = random[_DATA_KEY : _DATA_KEY + _NONCE]
        body_nonce = random[_DATA_KEY + _NONCE :]
        wrapped = self._keys[key_id].encrypt(wrap_nonce, data_key, head)
        sealed = AESGCM(data_key).encrypt(body_nonce, body, _BODY_AD + aad)
        return b"".join((head, wrap_nonce, wrapped, body_nonce, sealed))

    def open(self, stored: bytes, aad: bytes) -> bytes:
        """The plaintext of ``stored`` (itself when it was never sealed)."""
        if stored[:4] != MAGIC:
            return stored
        envelope = _Envelope.parse(bytes(stored))
        data_key = self._unwrap(envelope)
        try:
            return AESGCM(data_key).decrypt(envelope.body_nonce, envelope.sealed, _BODY_AD + aad)
        except InvalidTag:
            raise KeyUnavailable(
                "the sealed value does not open for this row (moved from another row, or damaged)"
            ) from None

    def seal_text(self, source: str, text: str, aad: bytes) -> str:
        if source not in self._sealed:
            return text
        return TEXT_PREFIX + base64.b64encode(self.seal_always(text.encode(), aad)).decode()

    def open_text(self, stored: str, aad: bytes) -> str:
        if not stored.startswith(TEXT_PREFIX):
            return stored
        return self.open(_text_bytes(stored), aad).decode("utf-8", errors="replace")

    def rewrap(self, stored: bytes) -> bytes | None:
        """``stored`` with its data key wrapped by the current key, or None when it is
        plaintext or already under the current key. The sealed body is unchanged, so no
        row identity is needed."""
        if stored[:4] != MAGIC or self._current is None:
            return None
        envelope = _Envelope.parse(bytes(stored))
        if envelope.key_id == self._current:
            return None
        data_key = self._unwrap(envelope)
        head = self._heads[self._current]
        wrap_nonce = os.urandom(_NONCE)
        wrapped = self._keys[self._current].encrypt(wrap_nonce, data_key, head)
        return b"".join((head, wrap_nonce, wrapped, envelope.body_nonce, envelope.sealed))

    def rewrap_text(self, stored: str) -> str | None:
        if not stored.startswith(TEXT_PREFIX):
            return None
        rewrapped = self.rewrap(_text_bytes(stored))
        return None if rewrapped is None else TEXT_PREFIX + base64.b64encode(rewrapped).decode()

    def _unwrap(self, envelope: _Envelope) -> bytes:
        kek = self._keys.get(envelope.key_id)
        if kek is None:
            raise KeyUnavailable(f"key {envelope.key_id!r} is not in the encryption key ring")
        try:
            return kek.decrypt(envelope.wrap_nonce, envelope.wrapped, envelope.head)
        except InvalidTag:
            raise KeyUnavailable(
                f"the ring's key {envelope.key_id!r} is not the key that sealed this value"
            ) from None


def key_id_of(stored: bytes | str | None) -> str | None:
    """The id of the key a sealed value's data key is wrapped with; None for plaintext."""
    if isinstance(stored, str):
        if not stored.startswith(TEXT_PREFIX):
            return None
        stored = _text_bytes(stored)
    if stored is None or stored[:4] != MAGIC:
        return None
    return _Envelope.parse(bytes(stored)).key_id


#: Encryption off: nothing sealed, plaintext passed through, a sealed row refused.
PLAINTEXT = Sealer()


def _head(key_id: str) -> bytes:
    encoded = key_id.encode()
    return MAGIC + bytes([VERSION, len(encoded)]) + encoded


def _text_bytes(stored: str) -> bytes:
    try:
        return base64.b64decode(stored[len(TEXT_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise KeyUnavailable("a sealed snippet is damaged") from None


class _Envelope:
    """The parts of a sealed binary value."""

    __slots__ = ("body_nonce", "head", "key_id", "sealed", "wrap_nonce", "wrapped")

    def __init__(self, stored: bytes) -> None:
        if len(stored) < 6 or stored[4] != VERSION:
            raise KeyUnavailable("a sealed value of an unknown format version")
        end = 6 + stored[5]
        if len(stored) < end + 2 * _NONCE + _WRAPPED + _TAG:
            raise KeyUnavailable("a sealed value is truncated")
        self.head = stored[:end]
        self.key_id = stored[6:end].decode("ascii", errors="replace")
        self.wrap_nonce = stored[end : end + _NONCE]
        self.wrapped = stored[end + _NONCE : end + _NONCE + _WRAPPED]
        start = end + _NONCE + _WRAPPED
        self.body_nonce = stored[start : start + _NONCE]
        self.sealed = stored[start + _NONCE :]

    @classmethod
    def parse(cls, stored: bytes) -> _Envelope:
        return cls(stored)
