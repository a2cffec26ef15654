"""Typed, frozen options of the schemes that need more than a secret.

They are fields of :class:`hookinbox.config.Source` (``[sources.NAME.hmac]`` and so on) and
are validated with it at start-up; the verifiers in :mod:`hookinbox.verify` read them.

A fingerprint policy (ids for providers that send none) is checked here too. What is never
a good field, and refused at start-up:

- an ``Authorization`` (or ``Proxy-Authorization``, ``Cookie``) header: a credential, and
  it changes when the token rotates, which would split one event into two;
- a signature header: it changes with every (re)delivery;
- a field the source lists in ``fingerprint_forbidden`` (a prompt, a temporary URL ...),
  or any parent or child of one, since a parent's value contains the child;
- by name, a few fields that are secrets or short-lived by nature: ``prompt``, ``secret``,
  ``password``, ``token``, ``api_key`` ... and anything ending in ``url`` (signed download
  URLs expire and are re-signed, so the "same" event would get a new id).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: Every value a source's ``scheme`` may take.
SCHEME_NAMES = (
    "api-key",
    "basic",
    "github",
    "hmac",
    "sdk",
    "shopify",
    "slack",
    "standard-webhooks",
    "stripe",
    "twilio",
)

#: Schemes whose senders may post forms (``body = "form"`` or ``"auto"``): Twilio (always),
#: Slack's interactivity and slash commands, any sender with a static credential or an HMAC.
FORM_SCHEMES = frozenset({"api-key", "basic", "hmac", "slack", "twilio"})

_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~\-]+$")
_POINTER = re.compile(r"^(/([^/~]|~[01])*)+$")


class _Options(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def check_header_name(value: str) -> str:
    if not _HEADER_NAME.match(value):
        raise ValueError(f"{value!r} is not an HTTP header name")
    return value.lower()


def check_pointer(value: str) -> str:
    """A JSON pointer (RFC 6901) naming a field: ``/data/id``; the whole body is refused."""
    if not _POINTER.match(value):
        raise ValueError(f"{value!r} is not a JSON pointer to a field (e.g. /data/id)")
    return value


class HmacOptions(_Options):
    """``scheme = "hmac"``: a provider that signs with a shared secret in its own way.

    ``signed_content`` is a template over the raw bytes: ``{body}`` (exactly once), and
    ``{timestamp}`` / ``{id}`` for the values of ``timestamp_header`` / ``id_header``.

    ``layout = "pairs"`` reads one header of comma-separated ``key=value`` pairs, the
    timestamp under ``timestamp_key`` and each signature under ``signature_key``
    (``mux-signature: t=1565220904,v1=20c7...``); ``{timestamp}`` is then that ``t``.
    ``handshake = "zoom"`` answers Zoom's ``endpoint.url_validation`` once the
    signature holds.
    """

    header: str
    algorithm: Literal["sha1", "sha256", "sha512"] = "sha256"
    encoding: Literal["hex", "base64"] = "hex"
    #: Text before the digest in the header, e.g. ``sha256=``.
    prefix: str = ""
    #: ``list``: space-separated signatures; ``pairs``: ``t=...,v1=...`` in one header.
    layout: Literal["list", "pairs"] = "list"
    #: With ``layout = "pairs"``: the key of the timestamp and of each signature.
    timestamp_key: str = Field(default="t", min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_]+$")
    signature_key: str = Field(
        default="v1", min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_]+$"
    )
    #: A provider's endpoint check answered after the signature holds (``zoom``).
    handshake: Literal["zoom"] | None = None
    timestamp_header: str | None = None
    signed_content: str = "{body}"
    id_header: str | None = None
    id_pointer: str | None = None
    type_header: str | None = None
    type_pointer: str | None = "/type"

    @field_validator("header", "timestamp_header", "id_header", "type_header")
    @classmethod
    def _header(cls, value: str | None) -> str | None:
        return None if value is None else check_header_name(value)

    @field_validator("id_pointer", "type_pointer")
    @classmethod
    def _pointer(cls, value: str | None) -> str | None:
        return None if value is None else check_pointer(value)

    @model_validator(mode="after")
    def _template(self) -> HmacOptions:
        if self.signed_content.count("{body}") != 1:
            raise ValueError("signed_content must contain {body} exactly once")
        if self.layout == "pairs" and self.timestamp_header is not None:
            raise ValueError(
                "layout 'pairs' reads the timestamp from the header; drop timestamp_header"
            )
        if self.layout == "pairs" and self.prefix:
            raise ValueError("layout 'pairs' names each signature by signature_key; drop prefix")
        if (
            "{timestamp}" in self.signed_content
            and self.timestamp_header is None
            and self.layout != "pairs"
        ):
            raise ValueError("signed_content uses {timestamp} but timestamp_header is not set")
        if "{id}" in self.signed_content and self.id_header is None:
            raise ValueError("signed_content uses {id} but id_header is not set")
        if self.id_header is not None and self.id_pointer is not None:
            raise ValueError("set id_header or id_pointer, not both")
        if self.type_header is not None and self.type_pointer not in (None, "/type"):
            raise ValueError("set type_header or type_pointer, not both")
        return self


class EventFields(_Options):
    """Where a scheme without a fixed layout finds the event id and type: a header or a
    JSON pointer into the body (a form's fields are ``/Name``). With neither id, the
    source needs a fingerprint policy."""

    id_header: str | None = None
    id_pointer: str | None = None
    type_header: str | None = None
    type_pointer: str | None = "/type"

    @field_validator("id_header", "type_header")
    @classmethod
    def _event_header(cls, value: str | None) -> str | None:
        return None if value is None else check_header_name(value)

    @field_validator("id_pointer", "type_pointer")
    @classmethod
    def _event_pointer(cls, value: str | None) -> str | None:
        return None if value is None else check_pointer(value)

    @model_validator(mode="after")
    def _one_place_each(self) -> EventFields:
        if self.id_header is not None and self.id_pointer is not None:
            raise ValueError("set id_header or id_pointer, not both")
        if self.type_header is not None and self.type_pointer not in (None, "/type"):
            raise ValueError("set type_header or type_pointer, not both")
        return self

    @property
    def has_id(self) -> bool:
        return self.id_header is not None or self.id_pointer is not None


class CredentialsOptions(EventFields):
    """``scheme = "basic"`` / ``"api-key"``: a sender that proves itself with a static
    credential instead of a signature. ``basic`` reads ``Authorization: Basic ...``
    (each secret is ``user:password``); ``api-key`` reads ``header`` (after ``prefix``,
    e.g. ``Bearer ``) and compares it with each secret."""

    #: ``api-key`` only: the header carrying the key (default ``x-api-key``).
    header: str | None = None
    #: ``api-key`` only: text before the key in the header (``Bearer ``).
    prefix: str = Field(default="", max_length=64)

    @field_validator("header")
    @classmethod
    def _key_header(cls, value: str | None) -> str | None:
        return None if value is None else check_header_name(value)


class TwilioOptions(EventFields):
    """``scheme = "twilio"``: ``X-Twilio-Signature``, the base64 HMAC-SHA1 of the URL
    Twilio called followed by every POST parameter, sorted, as name + value."""

    #: The public URL Twilio calls for this source, as configured in Twilio (scheme,
    #: host, optional port, path); each request's query string is appended to it.
    url: str
    type_pointer: str | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.match(r"^https?://[^\s/?#]+(/[^\s?#]*)?$", value):
            raise ValueError("url must be the http(s) URL Twilio calls, without query or fragment")
        return value


class StaticAnswer(_Options):
    """What the endpoint answers for an accepted (or duplicate) delivery, when the
    provider expects a body of its own (an empty 200, TwiML, a Slack message)."""

    status: int = Field(default=200, ge=200, le=299)
    #: A JSON value to answer with, or:
    json_body: Any = Field(default=None, alias="json")
    #: a text to answer with (may be empty), with its ``content_type``.
    text: str | None = Field(default=None, max_length=65536)
    content_type: str | None = Field(
        default=None, max_length=200, pattern=r"^[\x21-\x7e][\x20-\x7e]*$"
    )

    @model_validator(mode="after")
    def _one_body(self) -> StaticAnswer:
        if (self.json_body is None) == (self.text is None):
            raise ValueError("an answer needs exactly one of 'json' or 'text'")
        if self.json_body is not None and self.content_type is not None:
            raise ValueError("a 'json' answer is application/json; content_type is for 'text'")
        return self


class ShopifyOptions(_Options):
    """``scheme = "shopify"``: which delivery header identifies an event."""

    #: ``event``: ``X-Shopify-Event-Id``, the header Shopify's "Ignore duplicate webhooks"
    #: page names (same value = same event, even across subscriptions). ``webhook``:
    #: ``X-Shopify-Webhook-Id``, one per delivery (older guidance; stable across retries).
    dedup_on: Literal["event", "webhook"] = "event"


SdkProvider = Literal["openai", "standardwebhooks", "svix", "stripe"]


class SdkOptions(_Options):
    """``scheme = "sdk"``: delegate the signature check to the provider's own library."""

    provider: SdkProvider


class FingerprintPolicy(_Options):
    """How to name an event whose provider sends no id: ``fp:`` + SHA-256 of these values.

    Name only documented, stable fields that identify the event (a task id and its
    status, an order id and its version) -- never a prompt, a secret or a temporary URL.
    """

    #: JSON pointers into the body, in order.
    fields: tuple[str, ...] = ()
    #: Header names whose values take part, after the fields.
    headers: tuple[str, ...] = ()

    @field_validator("fields")
    @classmethod
    def _pointers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_pointer(v) for v in value)

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_header_name(v) for v in value)

    @model_validator(mode="after")
    def _not_empty(self) -> FingerprintPolicy:
        if not self.fields and not self.headers:
            raise ValueError("a fingerprint needs at least one field or header")
        if len(set(self.fields)) != len(self.fields) or len(set(self.headers)) != len(self.headers):
            raise ValueError("a fingerprint names each field or header once")
        return self


#: Headers that carry a credential or change on every delivery.
FORBIDDEN_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "webhook-signature",
        "svix-signature",
        "stripe-signature",
        "x-hub-signature",
        "x-hub-signature-256",
        "x-shopify-hmac-sha256",
        "shopify-hmac-sha256",
        "x-slack-signature",
        "x-twilio-signature",
        "x-api-key",
    }
)

#: Last pointer segments (lower-cased, ``-`` read as ``_``) refused whatever the config says.
FORBIDDEN_FIELD_NAMES = frozenset(
    {
        "prompt",
        "secret",
        "client_secret",
        "password",
        "token",
        "access_token",
        "refresh_token",
        "api_key",
        "apikey",
        "authorization",
    }
)


def _segment_name(pointer: str) -> str:
    last = pointer.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~")
    return last.lower().replace("-", "_")


def _overlaps(pointer: str, forbidden: str) -> bool:
    """``/input`` overlaps ``/input/prompt`` and the other way round."""
    return (
        pointer == forbidden
        or pointer.startswith(forbidden + "/")
        or (forbidden.startswith(pointer + "/"))
    )


def refuse_unsafe(policy: FingerprintPolicy, forbidden: Iterable[str] = ()) -> None:
    """Raise ValueError naming the first field or header a fingerprint must not use.

    ``forbidden`` holds JSON pointers (``/input/prompt``) and header names (``x-api-key``).
    """
    forbidden_pointers = [f for f in forbidden if f.startswith("/")]
    forbidden_headers = {f.lower() for f in forbidden if not f.startswith("/")}
    for header in policy.headers:
        if header in FORBIDDEN_HEADERS or header in forbidden_headers:
            raise ValueError(
                f"header {header!r} may not be part of a fingerprint "
                "(credentials and signatures never identify an event)"
            )
    for pointer in policy.fields:
        for denied in forbidden_pointers:
            if _overlaps(pointer, denied):
                raise ValueError(
                    f"field {pointer!r} is listed in (or overlaps) fingerprint_forbidden"
                )
        name = _segment_name(pointer)
        if name in FORBIDDEN_FIELD_NAMES or name.endswith("url"):
            raise ValueError(
                f"field {pointer!r} looks like a prompt, a secret or a temporary URL; "
                "a fingerprint uses stable identifying fields only"
            )
