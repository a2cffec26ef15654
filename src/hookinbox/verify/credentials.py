"""``scheme = "basic"`` and ``scheme = "api-key"``: senders with a static credential.

Some senders sign nothing: they send HTTP Basic credentials (``Authorization: Basic
base64(user:password)``) or a fixed key in a header (``X-Api-Key: ...``,
``Authorization: Bearer ...``). The source's secret variable holds the accepted
credentials, space-separated (``user:password`` for ``basic``), so rotation works as for
every scheme: add the new one, switch the sender, drop the old one.

Each offered credential is compared with every configured one in constant time, as
SHA-256 digests (equal lengths, so a length tells nothing), every pair compared. A
missing header is ``missing_headers``, a wrong credential ``invalid_credentials``. There
is no timestamp and no signature over the body: anyone holding the credential can send
anything, and a captured request can be replayed for ever -- the journal's dedup on the
event id is the only replay guard. Prefer a signing scheme whenever the sender has one.
The credential header is never stored, logged or forwarded.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping, Sequence

from hookinbox.config.schemes import CredentialsOptions, EventFields, FingerprintPolicy
from hookinbox.errors import ConfigError, InvalidCredentials, MissingHeaders
from hookinbox.payload import JSON_BODY, BodyFormat
from hookinbox.verify.base import VerifiedEvent, any_digest_matches, read_body
from hookinbox.verify.fingerprint import event_of

AUTHORIZATION = "authorization"
#: The header an ``api-key`` source reads unless ``credentials.header`` says otherwise.
DEFAULT_KEY_HEADER = "x-api-key"
_BASIC = "basic "


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).digest()


def credential_header(options: CredentialsOptions | None, scheme: str) -> str:
    """The header a ``basic`` or ``api-key`` source reads its credential from."""
    if scheme == "basic":
        return AUTHORIZATION
    return (options.header if options and options.header else None) or DEFAULT_KEY_HEADER


class _CredentialVerifier:
    def __init__(
        self,
        secrets: Sequence[str],
        *,
        options: CredentialsOptions | None,
        fingerprint: FingerprintPolicy | None,
        body_format: BodyFormat,
    ) -> None:
        self._expected = [_digest(secret) for secret in secrets]
        self._options = options or CredentialsOptions()
        self._fingerprint = fingerprint
        self._body_format = body_format

    def _offered(self, headers: Mapping[str, str]) -> str:
        raise NotImplementedError

    def verify(self, body: bytes, headers: Mapping[str, str], *, now: float) -> VerifiedEvent:
        offered = self._offered(headers)
        if not any_digest_matches([_digest(offered)], self._expected):
            raise InvalidCredentials()
        payload = read_body(body, headers, self._body_format)
        event_id, event_type = event_of(self._options, payload, headers, self._fingerprint)
        return VerifiedEvent(event_id=event_id, event_type=event_type, payload=payload)


class BasicVerifier(_CredentialVerifier):
    """``Authorization: Basic base64(user:password)``; each secret is ``user:password``."""

    def __init__(
        self,
        secrets: Sequence[str],
        *,
        options: CredentialsOptions | None = None,
        fingerprint: FingerprintPolicy | None = None,
        body_format: BodyFormat = JSON_BODY,
    ) -> None:
        if not secrets:
            raise ConfigError("basic needs at least one user:password")
        if any(":" not in secret for secret in secrets):
            raise ConfigError("basic: each credential is user:password")
        super().__init__(secrets, options=options, fingerprint=fingerprint, body_format=body_format)

    def _offered(self, headers: Mapping[str, str]) -> str:
        value = headers.get(AUTHORIZATION, "").strip()
        if not value[: len(_BASIC)].lower() == _BASIC:
            raise MissingHeaders("No Authorization: Basic header.")
        try:
            raw = base64.b64decode(value[len(_BASIC) :].strip(), validate=True)
        except (binascii.Error, ValueError):
            raise InvalidCredentials("The Basic credentials are not base64.") from None
        # RFC 7617: UTF-8 is what senders use; anything else cannot equal a configured one.
        return raw.decode("utf-8", "surrogateescape")


class ApiKeyVerifier(_CredentialVerifier):
    """A static key in ``credentials.header`` (default ``X-Api-Key``), after ``prefix``."""

    def __init__(
        self,
        secrets: Sequence[str],
        *,
        options: CredentialsOptions | None = None,
        fingerprint: FingerprintPolicy | None = None,
        body_format: BodyFormat = JSON_BODY,
    ) -> None:
        if not secrets:
            raise ConfigError("api-key needs at least one key")
        super().__init__(secrets, options=options, fingerprint=fingerprint, body_format=body_format)
        self._header = credential_header(options, "api-key")
        self._prefix = self._options.prefix

    def _offered(self, headers: Mapping[str, str]) -> str:
        value = headers.get(self._header)
        if not value:
            raise MissingHeaders()
        value = value.strip()
        prefix = self._prefix.strip()
        if prefix:
            if value[: len(prefix)].lower() != prefix.lower():
                raise InvalidCredentials()
            value = value[len(prefix) :].strip()
        return value


def event_headers(fields: EventFields | None, event_id: str, event_type: str) -> dict[str, str]:
    """The id and type headers a sender adds when the source reads them from headers."""
    headers = {}
    if fields is not None and fields.id_header:
        headers[fields.id_header] = event_id
    if fields is not None and fields.type_header:
        headers[fields.type_header] = event_type
    return headers


class BasicSigner:
    def __init__(self, secret: str, *, options: CredentialsOptions | None = None) -> None:
        self._value = "Basic " + base64.b64encode(secret.encode()).decode()
        self._options = options

    def sign(
        self, body: bytes, *, event_id: str, event_type: str, timestamp: int
    ) -> dict[str, str]:
        return {AUTHORIZATION: self._value, **event_headers(self._options, event_id, event_type)}


class ApiKeySigner:
    def __init__(self, secret: str, *, options: CredentialsOptions | None = None) -> None:
        self._header = credential_header(options, "api-key")
        prefix = options.prefix if options else ""
        self._value = prefix + secret
        self._options = options

    def sign(
        self, body: bytes, *, event_id: str, event_type: str, timestamp: int
    ) -> dict[str, str]:
        return {self._header: self._value, **event_headers(self._options, event_id, event_type)}
