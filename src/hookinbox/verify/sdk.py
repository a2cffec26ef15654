"""``scheme = "sdk"``: let the provider's own library check the signature.

For users who prefer the official helper to hookinbox's implementation. Install the
extra: ``pip install hookinbox[openai]`` (or ``[stripe]``, ``[svix]``,
``[standardwebhooks]``). The error codes are the built-in schemes': hookinbox first checks
that the headers are there (``missing_headers``) and that the signed timestamp is within
the source's tolerance by the receiver's clock (``timestamp_out_of_tolerance``), then hands
the raw bytes to the library; whatever the library refuses is ``invalid_signature``. The
libraries read their own clock too (standardwebhooks and svix with a fixed five minutes),
so a source tolerance above 300 s is effectively capped by them.

The library's own exception is dropped (``from None``) on purpose: Stripe's carries the
raw payload, and payloads never reach a log.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hookinbox.config.schemes import FingerprintPolicy, SdkProvider
from hookinbox.errors import ConfigError, InvalidSignature, MissingEventId, MissingHeaders
from hookinbox.verify import stripe as builtin_stripe
from hookinbox.verify.base import (
    VerifiedEvent,
    check_timestamp,
    event_type_of,
    parse_json_object,
    string_at,
)
from hookinbox.verify.fingerprint import identify

#: Raises on a bad delivery; returns nothing useful.
Check = Callable[[bytes, Mapping[str, str]], object]

_EXTRA = {
    "openai": "openai",
    "stripe": "stripe",
    "svix": "svix",
    "standardwebhooks": "standardwebhooks",
}


def _import(provider: SdkProvider, module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"sdk.provider: {provider!r} needs the official library: "
            f"pip install 'hookinbox[{_EXTRA[provider]}]'"
        ) from None


def _checks(provider: SdkProvider, secrets: Sequence[str], tolerance: int) -> list[Check]:
    """One callable per secret, each delegating to the official helper."""
    if provider == "standardwebhooks":
        lib = _import(provider, "standardwebhooks")
        return [lib.Webhook(secret).verify for secret in secrets]
    if provider == "svix":
        lib = _import(provider, "svix.webhooks")
        return [lib.Webhook(secret).verify for secret in secrets]
    if provider == "openai":
        lib = _import(provider, "openai")
        # No API call is ever made; the client only hosts the webhook helper. unwrap() is
        # verify_signature() with a fixed 300 s plus parsing; calling verify_signature
        # directly lets the source's tolerance apply on both sides.
        client = lib.OpenAI(api_key="unused-by-webhook-verification", max_retries=0)

        def openai_check(secret: str) -> Check:
            def check(body: bytes, headers: Mapping[str, str]) -> object:
                return client.webhooks.verify_signature(
                    body, dict(headers), secret=secret, tolerance=tolerance
                )

            return check

        return [openai_check(secret) for secret in secrets]
    lib = _import(provider, "stripe")

    def stripe_check(secret: str) -> Check:
        def check(body: bytes, headers: Mapping[str, str]) -> object:
            return lib.Webhook.construct_event(
                body, headers.get(builtin_stripe.HEADER), secret, tolerance=tolerance
            )

        return check

    return [stripe_check(secret) for secret in secrets]


class SdkVerifier:
    def __init__(
        self,
        secrets: Sequence[str],
        *,
        provider: SdkProvider,
        tolerance_seconds: int = 300,
        fingerprint: FingerprintPolicy | None = None,
    ) -> None:
        if not secrets:
            raise ConfigError("sdk needs at least one secret")
        self._provider = provider
        self._checks = _checks(provider, secrets, tolerance_seconds)
        self._tolerance = tolerance_seconds
        self._fingerprint = fingerprint

    def verify(self, body: bytes, headers: Mapping[str, str], *, now: float) -> VerifiedEvent:
        if self._provider == "stripe":
            header = headers.get(builtin_stripe.HEADER)
            if not header:
                raise MissingHeaders()
            stamp, _ = builtin_stripe.parse_header(header)
            if not stamp:
                raise MissingHeaders("The Stripe-Signature header has no t= timestamp.")
            event_id_header = None
        else:
            prefixes = ("webhook-", "svix-") if self._provider == "svix" else ("webhook-",)
            values = {
                name: next((headers[p + name] for p in prefixes if headers.get(p + name)), "")
                for name in ("id", "timestamp", "signature")
            }
            if not values["timestamp"] or not values["signature"]:
                raise MissingHeaders()
            if not values["id"]:  # as the built-in scheme: the id header is the event id
                raise MissingEventId()
            stamp, event_id_header = values["timestamp"], values["id"]
        timestamp = check_timestamp(stamp, now=now, tolerance_seconds=self._tolerance)
        if not self._any_accepts(body, headers):
            raise InvalidSignature()
        payload = parse_json_object(body)
        event_id = event_id_header or string_at(payload, "/id")
        return VerifiedEvent(
            event_id=identify(event_id, payload, headers, self._fingerprint),
            event_type=event_type_of(payload),
            payload=payload,
            timestamp=timestamp,
        )

    def _any_accepts(self, body: bytes, headers: Mapping[str, str]) -> bool:
        accepted = False
        for check in self._checks:
            try:
                check(body, headers)
            except Exception:  # each library has its own error class; all mean "refused"
                continue
            accepted = True
        return accepted
