"""Scheme name -> verifier and signer factories. A source's ``scheme`` picks one.

``build_verifier`` runs once per source at start-up; every :class:`ConfigError` a scheme
raises about its secrets or options comes out naming the source's key, and never the
secret itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from hookinbox.config import Source
from hookinbox.config.schemes import SCHEME_NAMES, HmacOptions, SdkOptions, TwilioOptions
from hookinbox.errors import ConfigError
from hookinbox.verify.base import Signer, Verifier
from hookinbox.verify.bodies import body_format
from hookinbox.verify.credentials import (
    ApiKeySigner,
    ApiKeyVerifier,
    BasicSigner,
    BasicVerifier,
    credential_header,
)
from hookinbox.verify.generic_hmac import HmacSigner, HmacVerifier
from hookinbox.verify.github import GitHubSigner, GitHubVerifier
from hookinbox.verify.sdk import SdkVerifier
from hookinbox.verify.shopify import ShopifySigner, ShopifyVerifier
from hookinbox.verify.slack import SlackSigner, SlackVerifier
from hookinbox.verify.standard_webhooks import StandardWebhooksSigner, StandardWebhooksVerifier
from hookinbox.verify.stripe import StripeSigner, StripeVerifier
from hookinbox.verify.twilio import TwilioSigner, TwilioVerifier


@dataclass(frozen=True)
class Scheme:
    name: str
    verifier: Callable[[Source, Sequence[str]], Verifier]
    signer: Callable[[Source, str], Signer]


def _hmac_options(source: Source) -> HmacOptions:
    if source.hmac is None:  # refused by the config already; kept for library callers
        raise ConfigError("hmac: scheme 'hmac' needs a [sources.NAME.hmac] table")
    return source.hmac


def _twilio_options(source: Source) -> TwilioOptions:
    if source.twilio is None:
        raise ConfigError("twilio: scheme 'twilio' needs a [sources.NAME.twilio] table")
    return source.twilio


def _sdk_options(source: Source) -> SdkOptions:
    if source.sdk is None:
        raise ConfigError("sdk: scheme 'sdk' needs a [sources.NAME.sdk] table")
    return source.sdk


def _sdk_signer(source: Source, secret: str) -> Signer:
    # The official libraries verify what the provider sends; the built-in signers produce it.
    if _sdk_options(source).provider == "stripe":
        return StripeSigner(secret)
    return StandardWebhooksSigner(secret)


SCHEMES: dict[str, Scheme] = {
    scheme.name: scheme
    for scheme in (
        Scheme(
            name="standard-webhooks",
            verifier=lambda source, secrets: StandardWebhooksVerifier(
                secrets, tolerance_seconds=source.tolerance_seconds
            ),
            signer=lambda source, secret: StandardWebhooksSigner(secret),
        ),
        Scheme(
            name="stripe",
            verifier=lambda source, secrets: StripeVerifier(
                secrets,
                tolerance_seconds=source.tolerance_seconds,
                fingerprint=source.fingerprint,
            ),
            signer=lambda source, secret: StripeSigner(secret),
        ),
        Scheme(
            name="github",
            verifier=lambda source, secrets: GitHubVerifier(
                secrets, fingerprint=source.fingerprint
            ),
            signer=lambda source, secret: GitHubSigner(secret),
        ),
        Scheme(
            name="shopify",
            verifier=lambda source, secrets: ShopifyVerifier(
                secrets, options=source.shopify, fingerprint=source.fingerprint
            ),
            signer=lambda source, secret: ShopifySigner(secret),
        ),
        Scheme(
            name="slack",
            verifier=lambda source, secrets: SlackVerifier(
                secrets,
                tolerance_seconds=source.tolerance_seconds,
                fingerprint=source.fingerprint,
                body_format=body_format(source),
            ),
            signer=lambda source, secret: SlackSigner(secret),
        ),
        Scheme(
            name="hmac",
            verifier=lambda source, secrets: HmacVerifier(
                secrets,
                options=_hmac_options(source),
                tolerance_seconds=source.tolerance_seconds,
                fingerprint=source.fingerprint,
                body_format=body_format(source),
            ),
            signer=lambda source, secret: HmacSigner(secret, options=_hmac_options(source)),
        ),
        Scheme(
            name="sdk",
            verifier=lambda source, secrets: SdkVerifier(
                secrets,
                provider=_sdk_options(source).provider,
                tolerance_seconds=source.tolerance_seconds,
                fingerprint=source.fingerprint,
            ),
            signer=_sdk_signer,
        ),
        Scheme(
            name="basic",
            verifier=lambda source, secrets: BasicVerifier(
                secrets,
                options=source.credentials,
                fingerprint=source.fingerprint,
                body_format=body_format(source),
            ),
            signer=lambda source, secret: BasicSigner(secret, options=source.credentials),
        ),
        Scheme(
            name="api-key",
            verifier=lambda source, secrets: ApiKeyVerifier(
                secrets,
                options=source.credentials,
                fingerprint=source.fingerprint,
                body_format=body_format(source),
            ),
            signer=lambda source, secret: ApiKeySigner(secret, options=source.credentials),
        ),
        Scheme(
            name="twilio",
            verifier=lambda source, secrets: TwilioVerifier(
                secrets,
                options=_twilio_options(source),
                fingerprint=source.fingerprint,
                body_format=body_format(source),
            ),
            signer=lambda source, secret: TwilioSigner(secret, options=_twilio_options(source)),
        ),
    )
}
assert set(SCHEMES) == set(SCHEME_NAMES), "options.SCHEME_NAMES and SCHEMES must agree"


def scheme_for(source: Source, where: str) -> Scheme:
    try:
        return SCHEMES[source.scheme]
    except KeyError:
        known = ", ".join(sorted(SCHEMES))
        raise ConfigError(
            f"{where}.scheme: unknown scheme {source.scheme!r} (known: {known})"
        ) from None


_T = TypeVar("_T")
#: A scheme's ConfigError about one of its options starts with that key: ``sdk.provider: ...``.
_OPTION_KEY = re.compile(r"^[a-z_]+(\.[a-z_]+)*: ")


def _naming(where: str, source: Source, build: Callable[[], _T]) -> _T:
    try:
        return build()
    except ConfigError as exc:
        message = exc.message
        if _OPTION_KEY.match(message):
            raise ConfigError(f"{where}.{message}") from None
        raise ConfigError(f"{where}.secret_env ({source.secret_env}): {message}") from None


def build_verifier(name: str, source: Source) -> Verifier:
    where = f"sources.{name}"
    scheme = scheme_for(source, where)
    return _naming(where, source, lambda: scheme.verifier(source, source.secrets()))


def build_signer(name: str, source: Source, secret: str) -> Signer:
    where = f"sources.{name}"
    scheme = scheme_for(source, where)
    return _naming(where, source, lambda: scheme.signer(source, secret))


def signature_headers(source: Source) -> frozenset[str]:
    """The headers an ``hmac`` source's options name (the signature, its timestamp, the
    event id and type): kept with each delivery and passed on by a forward like the fixed
    providers' own prefixes (``stripe-``, ``webhook-`` ...), so the target can check the
    signature again over the raw body it gets."""
    options = source.hmac if source.scheme == "hmac" else None
    if options is None:
        return frozenset()
    named = (options.header, options.timestamp_header, options.id_header, options.type_header)
    return frozenset(name for name in named if name)


#: Headers that carry a credential whoever receives them: never stored, kept with a
#: rejected delivery, or forwarded, by any source.
STANDARD_CREDENTIAL_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "x-api-key",
        "api-key",
        "x-auth-token",
        "x-access-token",
    }
)


def credential_headers(sources: Mapping[str, Source]) -> frozenset[str]:
    """Every header that is a credential for any source (an ``api-key`` source's key
    header) plus the standard ones: dropped from every delivery of every source, since a
    sender may send one source's credential to another. A ConfigError when a source
    signs with one of them (its signature would be dropped from what it forwards)."""
    found = set(STANDARD_CREDENTIAL_HEADERS)
    for source in sources.values():
        if source.scheme == "api-key":
            found.add(credential_header(source.credentials, "api-key"))
    for name, source in sources.items():
        for header in sorted(signature_headers(source) & found):
            raise ConfigError(
                f"sources.{name}.hmac: {header!r} is a credential header (of a source or "
                "a standard one), never kept or forwarded; the signature needs another"
            )
    return frozenset(found)
