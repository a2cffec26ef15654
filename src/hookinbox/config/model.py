"""The config file and its main tables: sources, routes, worker, server.

Every validation error names the key it is about (``sources.openai.routes.0.handler``) in
one line, because that line is what an operator sees when ``hookinbox serve`` refuses to
start. Secrets are never part of the file: a source names the environment variable that
holds them (``secret_env``) and they are read only at the edge, by :meth:`Source.secrets`.
"""

from __future__ import annotations

import difflib
import fnmatch
import ipaddress
import os
import re
import tomllib
import types
import typing
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from hookinbox.config.catch_up import CatchUpSettings, resolve_catch_up
from hookinbox.config.delivery import check_dead_letter_on, parse_schedule
from hookinbox.config.destinations import DestinationConfig, check_destinations
from hookinbox.config.encryption import EncryptionSettings, KeyRingKeys
from hookinbox.config.fields import ForwardUrl, Frozen, HandlerPath, parse_duration
from hookinbox.config.filters import MAX_CONDITIONS, Condition
from hookinbox.config.notify import NotifierConfig, check_notifiers
from hookinbox.config.operations import Operations
from hookinbox.config.privacy import PrivacySettings, check_redact
from hookinbox.config.rejected import RejectedSettings
from hookinbox.config.resources import (
    MachineConfig,
    OutboxSettings,
    ResourceBinding,
    check_resource_routes,
)
from hookinbox.config.schemes import (
    FORBIDDEN_HEADERS,
    FORM_SCHEMES,
    SCHEME_NAMES,
    CredentialsOptions,
    EventFields,
    FingerprintPolicy,
    HmacOptions,
    SdkOptions,
    ShopifyOptions,
    StaticAnswer,
    TwilioOptions,
    check_header_name,
    check_pointer,
    refuse_unsafe,
)
from hookinbox.config.telemetry import OtelSettings
from hookinbox.errors import ConfigError
from hookinbox.sealing import Sealer

DEFAULT_CONFIG_PATH = "hookinbox.toml"
CONFIG_ENV = "HOOKINBOX_CONFIG"

#: Keys that would put a secret into the file itself. Refused wherever they appear.
_SECRET_KEYS = frozenset({"secret", "secrets", "signing_secret", "webhook_secret", "api_key"})
#: ``order_key = "header:NAME"``: the key is a request header's value.
ORDER_HEADER = "header:"
_SECRET_VALUE = re.compile(r"^(whsec_|whpk_|whsk_|sk_live_|sk_test_|xoxb-|xoxp-)")


class Route(Frozen):
    """Which events of a source run which action."""

    #: Event types this route takes; globs (``response.*``, ``*``) allowed.
    events: tuple[str, ...] = ("*",)
    #: The action's name, unique in its source; the job id is ``{delivery_id}:{action}``.
    action: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.\-]+$")
    #: ``package.module:function`` run by a worker as ``fn(event, ctx, ...)``.
    handler: HandlerPath | None = None
    #: An internal URL that gets the raw body once per job (``Idempotency-Key`` = job id).
    forward: ForwardUrl | None = None
    #: A forward that takes longer is a failed attempt (``timeout``), retried.
    forward_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    #: A ``[destinations.NAME]`` to forward to, with its rate, concurrency and circuit.
    destination: str | None = Field(default=None, min_length=1, max_length=64)
    #: Drive a tracked resource through its state machine (see config.resources).
    resource: ResourceBinding | None = None
    #: Conditions on the body and kept headers, all of which must hold for the route to
    #: take the event (see config.filters); evaluated once, when the delivery is reserved.
    filter: tuple[Condition, ...] = Field(default=(), max_length=MAX_CONDITIONS)
    #: The waits after each failed attempt (``["5s", "1m", "1h"]``); its length bounds the
    #: attempts (waits + 1). Unset: ``[worker]``'s exponential backoff and max_attempts.
    retry_schedule: tuple[float, ...] | None = None
    #: Statuses of a forward's target that no retry can help: the job goes straight to
    #: the dead letters with ``http_<status>`` (see config.delivery).
    dead_letter_on: tuple[Annotated[int, Field(strict=True)], ...] = ()
    #: Jobs of this route that share a key run one at a time, in reservation order,
    #: while other keys run in parallel (docs/concepts/ordering.md): a JSON pointer into
    #: the body (``/data/object/id``) or ``header:NAME``. A delivery without the key runs
    #: unordered. Unset: every job of the route may run at once.
    order_key: str | None = Field(default=None, max_length=300)
    #: An ordered route's dead letter: ``release`` lets the next job of its key run;
    #: ``hold`` keeps the key held until an operator retries (or the retention drops)
    #: the dead job.
    on_dead_letter: Literal["release", "hold"] = "release"

    @field_validator("order_key")
    @classmethod
    def _order_key(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if value.startswith("/"):
            return check_pointer(value)
        if value.lower().startswith(ORDER_HEADER):
            name = check_header_name(value[len(ORDER_HEADER) :].strip())
            if name in FORBIDDEN_HEADERS:
                raise ValueError(
                    f"header {name!r} is a credential or a signature; routes never read it"
                )
            return ORDER_HEADER + name
        raise ValueError(f"{value!r} is neither a JSON pointer (/data/object/id) nor 'header:NAME'")

    #: Fields replaced before the payload is stored when this route takes the event (JSON
    #: pointers, ``*`` over one level of keys), on top of the source's own ``redact``.
    redact: tuple[str, ...] = ()
    #: This route's ``redact`` fields get a keyed hash (``[privacy]``) instead of the marker.
    redact_hash: bool = False

    @field_validator("redact")
    @classmethod
    def _redact(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return check_redact(value)

    @field_validator("retry_schedule", mode="before")
    @classmethod
    def _schedule(cls, value: Any) -> tuple[float, ...] | None:
        return parse_schedule(value)

    @field_validator("dead_letter_on")
    @classmethod
    def _statuses(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        return check_dead_letter_on(value)

    @field_validator("events")
    @classmethod
    def _events_not_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or any(not e for e in value):
            raise ValueError("events must list at least one event name or glob")
        return value

    @model_validator(mode="after")
    def _exactly_one_target(self) -> Route:
        targets = (self.handler, self.forward, self.resource, self.destination)
        if sum(target is not None for target in targets) != 1:
            raise ValueError(
                "a route needs exactly one of 'handler', 'forward', 'destination' or 'resource'"
            )
        if self.resource is not None and self.retry_schedule is not None:
            raise ValueError(
                "a resource route re-checks on its own park policy: drop retry_schedule"
            )
        if self.forward is None and self.destination is None and self.dead_letter_on:
            raise ValueError("dead_letter_on applies to forward routes (HTTP statuses)")
        if self.on_dead_letter == "hold" and self.order_key is None:
            raise ValueError("on_dead_letter = 'hold' holds a key: it needs order_key")
        return self

    def attempts(self, worker: Worker) -> int:
        """How many attempts a job of this route gets: its schedule's waits + 1, or
        ``[worker] max_attempts``."""
        if self.retry_schedule is not None:
            return len(self.retry_schedule) + 1
        return worker.max_attempts

    def matches(self, event_type: str) -> bool:
        return any(fnmatch.fnmatchcase(event_type, pattern) for pattern in self.events)


class Source(Frozen):
    """One webhook endpoint: ``POST /webhooks/{name}``."""

    #: How deliveries are signed (docs/schemes.md): one of ``SCHEME_NAMES``.
    scheme: str = "standard-webhooks"
    #: The environment variable holding the secret(s), space-separated while rotating.
    secret_env: str = Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    #: How far the signed timestamp may be from the receiver's clock, either way.
    tolerance_seconds: int = Field(default=300, ge=1, le=86400)
    #: A longer body is refused with 413 while it streams in, before it is parsed.
    max_body_bytes: int = Field(default=1_048_576, ge=1, le=64 * 1_048_576)
    #: What each event runs (``[[sources.NAME.routes]]``); one job per matching route.
    routes: tuple[Route, ...] = ()
    #: How long this provider keeps retrying a delivery (OpenAI: 72h); journal keys must
    #: outlive the longest of these and ``operations.redelivery_window``.
    redelivery_window: float | None = None
    #: Scheme options; each table is allowed only with its scheme (see docs/schemes.md).
    hmac: HmacOptions | None = Field(default=None, validate_default=True)
    shopify: ShopifyOptions | None = None
    sdk: SdkOptions | None = Field(default=None, validate_default=True)
    twilio: TwilioOptions | None = Field(default=None, validate_default=True)
    #: ``basic`` and ``api-key``: where the key is and where the event id and type are.
    credentials: CredentialsOptions | None = Field(default=None, validate_default=True)
    #: ``json`` (every body a JSON object), ``form`` (every body a form) or ``auto`` (a
    #: form when the Content-Type is application/x-www-form-urlencoded). Unset: ``auto``
    #: for twilio, ``json`` for the rest.
    body: Literal["json", "form", "auto"] | None = None
    #: What an accepted or duplicate delivery is answered with, when the provider needs
    #: a body of its own (``[sources.NAME.answer]``); refusals keep ``{"error": CODE}``.
    answer: StaticAnswer | None = None
    #: JSON pointers and header names a fingerprint may never use (prompts, temporary URLs).
    fingerprint_forbidden: tuple[str, ...] = ()
    #: How to name events that arrive without an id (``fp:`` + SHA-256 of these values).
    fingerprint: FingerprintPolicy | None = Field(default=None, validate_default=True)
    #: Seal this source's bodies and answer snippets at rest (``[encryption]``); unset,
    #: ``encryption.enabled`` decides.
    encrypt: bool | None = None
    #: Fields replaced before any payload of this source is stored or forwarded (JSON
    #: pointers, ``*`` over one level of keys; see config.privacy). JSON bodies only.
    redact: tuple[str, ...] = ()
    #: ``redact`` fields get a keyed hash (``[privacy]``) instead of ``"[redacted]"``.
    redact_hash: bool = False
    #: Where a delivery's data subject is (``/data/object/customer``): its keyed hash is
    #: stored with the delivery, so ``hookinbox erase --subject`` finds it.
    subject: str | None = None

    @field_validator("redact")
    @classmethod
    def _redact(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return check_redact(value)

    @field_validator("subject")
    @classmethod
    def _subject(cls, value: str | None) -> str | None:
        return None if value is None else check_pointer(value)

    @model_validator(mode="after")
    def _redaction_needs_json(self) -> Source:
        redacting = bool(self.redact) or any(route.redact for route in self.routes)
        if redacting and self.body_kind != "json":
            raise ValueError(
                f"redact applies to JSON bodies only; this source takes body = "
                f"{self.body_kind!r} (a form's fields cannot be redacted)"
            )
        return self

    @property
    def needs_hash_key(self) -> bool:
        """Whether this source hashes anything with the ``[privacy]`` key."""
        return (
            self.subject is not None
            or (self.redact_hash and bool(self.redact))
            or any(route.redact_hash and route.redact for route in self.routes)
        )

    #: Pulling what the provider's API still holds (``[sources.NAME.catch_up]``; see
    #: config.catch_up): off unless the table is there.
    catch_up: CatchUpSettings | None = None

    @field_validator("scheme")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        if value not in SCHEME_NAMES:
            raise ValueError(f"unknown scheme {value!r} (known: {', '.join(SCHEME_NAMES)})")
        return value

    @field_validator("hmac", "shopify", "sdk", "twilio", "credentials")
    @classmethod
    def _options_match_scheme(cls, value: object, info: ValidationInfo) -> object:
        scheme, table = info.data.get("scheme"), str(info.field_name)
        schemes = ("basic", "api-key") if table == "credentials" else (table,)
        if value is not None and scheme is not None and scheme not in schemes:
            wanted = " or ".join(repr(s) for s in schemes)
            raise ValueError(f"these options apply only to scheme = {wanted}, not {scheme!r}")
        if value is None and scheme == table and table in ("hmac", "sdk", "twilio"):
            raise ValueError(f"scheme = {table!r} needs a [sources.NAME.{table}] table")
        if (
            isinstance(value, CredentialsOptions)
            and scheme == "basic"
            and (value.header is not None or value.prefix)
        ):
            raise ValueError("scheme 'basic' reads the Authorization header; drop header/prefix")
        return value

    @field_validator("body")
    @classmethod
    def _forms_allowed(cls, value: str | None, info: ValidationInfo) -> str | None:
        scheme = info.data.get("scheme")
        if value not in (None, "json") and scheme not in FORM_SCHEMES:
            known = ", ".join(sorted(FORM_SCHEMES))
            raise ValueError(f"scheme {scheme!r} takes JSON bodies only (forms: {known})")
        return value

    @field_validator("fingerprint_forbidden")
    @classmethod
    def _forbidden_entries(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_pointer(v) if v.startswith("/") else check_header_name(v) for v in value)

    @field_validator("fingerprint")
    @classmethod
    def _safe_fingerprint(
        cls, value: FingerprintPolicy | None, info: ValidationInfo
    ) -> FingerprintPolicy | None:
        if value is not None:
            refuse_unsafe(value, info.data.get("fingerprint_forbidden", ()))
        options = info.data.get("hmac")
        if (
            value is None
            and isinstance(options, HmacOptions)
            and options.id_header is None
            and options.id_pointer is None
        ):
            raise ValueError(
                "scheme 'hmac' without hmac.id_header or hmac.id_pointer needs a fingerprint policy"
            )
        scheme = info.data.get("scheme")
        if value is None and scheme in ("basic", "api-key", "twilio"):
            table = "twilio" if scheme == "twilio" else "credentials"
            fields = info.data.get(table)
            if not (isinstance(fields, EventFields) and fields.has_id):
                raise ValueError(
                    f"scheme {scheme!r} without {table}.id_header or {table}.id_pointer "
                    "needs a fingerprint policy"
                )
        return value

    @field_validator("routes")
    @classmethod
    def _unique_actions(cls, value: tuple[Route, ...]) -> tuple[Route, ...]:
        seen: set[str] = set()
        for route in value:
            if route.action in seen:
                raise ValueError(f"action {route.action!r} appears twice; actions are unique")
            seen.add(route.action)
        return value

    @field_validator("catch_up")
    @classmethod
    def _catch_up_provider(
        cls, value: CatchUpSettings | None, info: ValidationInfo
    ) -> CatchUpSettings | None:
        return resolve_catch_up(value, info.data.get("scheme"))

    @field_validator("redelivery_window", mode="before")
    @classmethod
    def _window(cls, value: Any) -> float | None:
        return None if value is None else parse_duration(value)

    @property
    def body_kind(self) -> Literal["json", "form", "auto"]:
        """How this source's bodies are read (``body``, or the scheme's default)."""
        if self.body is not None:
            return self.body
        return "auto" if self.scheme == "twilio" else "json"

    def secrets(self) -> list[str]:
        """The source's secrets, read from the environment now (several allow rotation)."""
        raw = os.environ.get(self.secret_env, "")
        return raw.split()

    def route(self, action: str) -> Route | None:
        return next((route for route in self.routes if route.action == action), None)

    def routes_for(self, event_type: str) -> list[Route]:
        return [route for route in self.routes if route.matches(event_type)]


class Worker(Frozen):
    #: Jobs one worker process runs at once.
    concurrency: int = Field(default=4, ge=1, le=256)
    #: The most jobs one claim takes. A worker whose ``concurrency`` is larger cuts its
    #: slots into lanes no wider than this, each claiming and settling on its own, so
    #: one lane's jobs run while another's statement is in the store (short jobs: a
    #: worker of one lane waits on each statement in turn). Larger claims cost the store
    #: less per job (its statement and commit are fixed costs); more lanes overlap more.
    claim_batch: int = Field(default=64, ge=1, le=256)
    #: Attempts before a job is a dead letter (``failed``).
    max_attempts: int = Field(default=8, ge=1, le=100)
    #: The first retry's delay; doubled per attempt, with jitter.
    backoff_base_seconds: float = Field(default=1.0, gt=0, le=3600)
    #: The longest delay between two attempts.
    backoff_max_seconds: float = Field(default=300.0, gt=0, le=86400)
    #: A claimed job is the worker's this long, renewed while it runs; a dead worker's
    #: job is taken by another once its lease expires.
    lease_seconds: float = Field(default=30.0, ge=1, le=86400)
    #: How often an idle worker looks for due jobs when nothing wakes it.
    poll_interval_seconds: float = Field(default=1.0, gt=0, le=60)
    #: An action running longer is abandoned as a failed attempt (``job_timeout``).
    job_timeout_seconds: float = Field(default=600.0, gt=0, le=7 * 86400)
    #: ``package.module:factory`` returning the services handlers ask for by name (a
    #: mapping), for processes the application does not build (``hookinbox worker``).
    services: HandlerPath | None = None
    #: A forward answered 429 or 503 with ``Retry-After`` comes back at that time, but
    #: never later than this.
    retry_after_max_seconds: float = Field(default=3600.0, gt=0, le=86400)
    #: How many such waits per job spend no attempt; past them each one spends one.
    free_deferrals: int = Field(default=5, ge=0, le=100)
    #: A job of an ordered route (``order_key``) is claimed only once its delivery id is
    #: this old: a reservation made earlier (by another receiver, or a batch still on its
    #: way) commits within it, so no earlier job of the key can appear after a later one
    #: ran. It must exceed the receivers' clock skew plus a reservation's commit time.
    order_grace_seconds: float = Field(default=1.0, ge=0, le=60)

    @model_validator(mode="after")
    def _backoff_order(self) -> Worker:
        if self.backoff_max_seconds < self.backoff_base_seconds:
            raise ValueError("backoff_max_seconds must be at least backoff_base_seconds")
        return self


class Server(Frozen):
    #: The address ``hookinbox serve`` binds (``--host`` overrides).
    host: str = "127.0.0.1"
    #: Its port (``--port`` overrides).
    port: int = Field(default=8080, ge=0, le=65535)
    #: A second listener for operators: ``/metrics``, ``/admin`` and the operator API are
    #: then served there only (and ``/webhooks`` only on ``port``), so the port that faces
    #: the internet answers providers and health checks and nothing else. Unset: one
    #: listener serves everything.
    admin_port: int | None = Field(default=None, ge=1, le=65535)
    #: The operator listener's address; unset, the loopback interface.
    admin_host: str = "127.0.0.1"
    #: Most reservations written in one commit.
    batch_max: int = Field(default=256, ge=1, le=10000)
    #: How long the first reservation of a batch waits for others, in milliseconds; 0
    #: means one turn of the event loop (what became ready together commits together).
    batch_wait_ms: float = Field(default=0.0, ge=0, le=100)
    #: Batches on their way to the store at once (overlap parsing with round trips).
    #: Unset: 4 on PostgreSQL; 1 on SQLite, whose one writer gains nothing from overlap
    #: and commits bigger batches when they gather behind the one in progress.
    batch_in_flight: int | None = Field(default=None, ge=1, le=64)
    #: A batch of fewer than 8 leaves while another is on its way only once that one has
    #: been out this long, in milliseconds: under light load the deliveries that came
    #: apart gather behind a commit into one batch (half the CPU per delivery at 8
    #: connections), under heavy load a batch is 8 at once and does not wait, and a
    #: stalled commit holds it back no longer than this. 0: as soon as a place among
    #: ``batch_in_flight`` is free.
    batch_overlap_ms: float = Field(default=1.0, ge=0, le=60_000)
    # Connection deadlines and bounds (hookinbox.server; figures in docs/server.md).
    #: The request line and headers must arrive within this (else 408 and close).
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    #: The whole body must arrive within this after the head (else 408 and close); no
    #: shorter than providers' own delivery timeouts (3 s Slack ... 30 s).
    body_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    #: An idle connection between requests is closed after this.
    keep_alive_timeout_seconds: float = Field(default=5.0, gt=0, le=300)
    #: A request head larger than this is answered 431 and closed.
    max_header_bytes: int = Field(default=65_536, ge=1024, le=16 * 1_048_576)
    #: Open client connections per listener and server process; at the cap a new one
    #: replaces the oldest idle or still-arriving one (then a stalled or slow one), or is
    #: answered 503. The operator listener has a cap of its own.
    max_connections: int = Field(default=512, ge=1, le=1_000_000)
    #: An answer the client does not read within this is dropped and the connection cut
    #: (a client that pipelines requests and never reads their answers).
    write_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    #: Proxies whose ``X-Forwarded-For`` names the client (addresses or CIDR blocks,
    #: ``["10.0.0.0/8"]``); from anyone else the header is ignored and the client is the
    #: TCP peer. The admin login's throttle counts per client address, so set it when a
    #: proxy stands in front of hookinbox (else every operator shares the proxy's budget).
    forwarded_allow_ips: tuple[str, ...] = Field(default=(), max_length=256)

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        networks = []
        for entry in value:
            try:
                networks.append(str(ipaddress.ip_network(entry.strip(), strict=False)))
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or a CIDR block") from None
        return tuple(networks)

    @model_validator(mode="after")
    def _admin_port_apart(self) -> Server:
        if self.admin_port is not None and self.admin_port == self.port:
            raise ValueError("admin_port must differ from port (it is a second listener)")
        return self


class Config(Frozen):
    #: The store: ``sqlite:///PATH`` (embedded; a relative PATH is relative to the config
    #: file's directory) or ``postgresql://...`` (production; libpq's ``PGPASSWORD`` and
    #: ``~/.pgpass`` supply a password the URL leaves out).
    database: str = "sqlite:///var/hookinbox.db"
    #: The environment variable holding the store's URL, instead of ``database``: for a
    #: URL with a password in it, which the file never holds.
    database_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    #: The webhook endpoints, by name (``[sources.NAME]``).
    sources: dict[str, Source] = Field(default_factory=dict)
    #: Workers (``[worker]``).
    worker: Worker = Worker()
    #: ``hookinbox serve`` (``[server]``).
    server: Server = Server()
    #: Dead-letter review, retention and purge, reconcile, pause (see config.operations).
    operations: Operations = Operations()
    #: State machines of tracked resources (``video`` is built in).
    machines: dict[str, MachineConfig] = Field(default_factory=dict)
    #: The relay that sends notifications (``[outbox]``).
    outbox: OutboxSettings = OutboxSettings()
    #: Deliveries refused for their signature or timestamp, kept for a retry (``[rejected]``).
    rejected: RejectedSettings = RejectedSettings()
    #: Where notices of dead letters, pauses and rejected deliveries go (``[notify.NAME]``).
    notify: dict[str, NotifierConfig] = Field(default_factory=dict)
    #: OpenTelemetry traces (``[otel]``), off by default.
    otel: OtelSettings = OtelSettings()
    #: Forward destinations with a rate, a concurrency limit and a circuit breaker.
    destinations: dict[str, DestinationConfig] = Field(default_factory=dict)
    #: The key of redaction and subject hashes (``[privacy]``).
    privacy: PrivacySettings = PrivacySettings()
    #: Payloads, rejected bodies and answer snippets sealed at rest (``[encryption]``).
    encryption: EncryptionSettings = EncryptionSettings()

    @field_validator("database")
    @classmethod
    def _database_url(cls, value: str) -> str:
        if not (value.startswith("sqlite:///") or re.match(r"^postgres(ql)?://", value)):
            raise ValueError("database must be sqlite:///PATH or postgresql://...")
        if value.startswith("sqlite:"):
            _check_sqlite_url(value)
        else:
            try:
                parts = urllib.parse.urlsplit(value)
                parts.port  # noqa: B018 - a port that is not a number raises here
            except ValueError:
                # Not the parser's words: they could quote the URL, password and all.
                raise ValueError("the PostgreSQL URL's host or port is malformed") from None
        return value

    @field_validator("sources")
    @classmethod
    def _source_names(cls, value: dict[str, Source]) -> dict[str, Source]:
        for name in value:
            if not re.match(r"^[A-Za-z0-9_\-]{1,64}$", name):
                raise ValueError(f"source name {name!r} may hold only letters, digits, _ and -")
        return value

    def longest_redelivery_window(self) -> float:
        """The longest any source's provider keeps retrying: the floor of key retention."""
        windows = [s.redelivery_window for s in self.sources.values() if s.redelivery_window]
        return max([self.operations.redelivery_window, *windows])

    @model_validator(mode="after")
    def _keys_outlive_every_source(self) -> Config:
        for name, source in self.sources.items():
            window = source.redelivery_window
            if window is not None and window > self.operations.key_retention:
                raise ConfigError(
                    f"sources.{name}.redelivery_window is longer than operations.key_retention:"
                    " a late retry from this provider would look like a new event"
                )
        return self

    @model_validator(mode="after")
    def _notifiers(self) -> Config:
        try:
            check_notifiers(self.notify, self.sources)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return self

    @model_validator(mode="after")
    def _destinations(self) -> Config:
        try:
            check_destinations(self.destinations, self.sources)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return self

    @model_validator(mode="after")
    def _resource_routes(self) -> Config:
        check_resource_routes(self.machines, self.sources)
        return self

    def source(self, name: str) -> Source | None:
        return self.sources.get(name)

    def attempts_for(self, source: str, action: str) -> int:
        """The attempts a job of (source, action) gets (its route's schedule, or
        ``[worker] max_attempts`` for a route that is gone or has none)."""
        found = self.sources.get(source)
        route = found.route(action) if found is not None else None
        return route.attempts(self.worker) if route is not None else self.worker.max_attempts

    def require_secrets(self) -> None:
        """Refuse to serve a source whose secret variable is unset or empty, or a config
        that seals with no usable key ring."""
        for name, source in self.sources.items():
            if not source.secrets():
                raise ConfigError(
                    f"sources.{name}.secret_env: environment variable "
                    f"{source.secret_env} is not set or empty"
                )
        if self.needs_hash_key:
            self.privacy.hash_key()
        self.key_ring()

    @property
    def needs_hash_key(self) -> bool:
        """Whether any source hashes with the ``[privacy]`` key (redact_hash, subject)."""
        return any(source.needs_hash_key for source in self.sources.values())

    def sealed_sources(self) -> frozenset[str]:
        """The sources whose bodies and snippets are sealed: ``encrypt``, else
        ``encryption.enabled``."""
        default = self.encryption.enabled
        return frozenset(
            name
            for name, source in self.sources.items()
            if (source.encrypt if source.encrypt is not None else default)
        )

    def sealer(self) -> Sealer:
        """What seals bodies and snippets at rest (``[encryption]``): the key ring read
        from the environment now, and the sources that seal. ConfigError when something
        seals and the ring is missing or malformed."""
        return Sealer(self.key_ring(), self.sealed_sources())

    def key_ring(self, environ: Mapping[str, str] | None = None) -> KeyRingKeys:
        """The encryption key ring, read from the environment now: ConfigError when it is
        malformed, or missing while something is sealed (an empty ring otherwise: rows
        sealed earlier then answer ``key_unavailable``)."""
        settings = self.encryption
        keys = settings.key_ring(os.environ if environ is None else environ)
        if not keys and (settings.enabled or self.sealed_sources()):
            raise ConfigError(
                f"encryption: environment variable {settings.keys_env} is not set or empty "
                "(a key ring ID:BASE64,... is needed to seal)"
            )
        return keys


def _check_sqlite_url(url: str) -> None:
    """The store's checks of a SQLite URL, made where the config is checked, so a bad one
    is a config error naming ``database`` (exit 2), not a store error (exit 3) from
    whatever opens the store first. The store is written to, so a ``mode``
    (``mode=ro``) is refused by name. It is kept, and shared by ``serve`` and the
    ``worker`` processes, so ``:memory:`` (a store of one process, gone when it exits)
    is refused too."""
    path, _, query = url.removeprefix("sqlite:///").partition("?")
    if not path:
        raise ValueError("the SQLite URL names no file (sqlite:///PATH)")
    if path == ":memory:":
        raise ValueError(
            "the SQLite URL names an in-memory store (:memory:), lost when the process "
            "exits and never shared with a worker: name a file (sqlite:///PATH)"
        )
    for key, value in urllib.parse.parse_qsl(query):
        if key == "mode":
            raise ValueError(
                f"the SQLite URL asks for mode={value}: the store must be writable, "
                "and busy_timeout_ms is the one parameter the URL takes"
            )
        if key != "busy_timeout_ms" or not value.isdigit():
            raise ValueError(
                f"the SQLite URL's parameter {key!r} is not busy_timeout_ms=MILLISECONDS, "
                "the one it takes"
            )


def _refuse_secrets(data: Any, path: str) -> None:
    if isinstance(data, Mapping):
        for key, value in data.items():
            where = f"{path}.{key}" if path else str(key)
            if str(key).lower() in _SECRET_KEYS:
                raise ConfigError(
                    f"{where}: secrets are never read from the config file; "
                    "put them in an environment variable and name it in secret_env"
                )
            _refuse_secrets(value, where)
    elif isinstance(data, list):
        for index, value in enumerate(data):
            _refuse_secrets(value, f"{path}.{index}")
    elif isinstance(data, str) and _SECRET_VALUE.match(data):
        raise ConfigError(
            f"{path}: this looks like a secret; secrets are never read from the config file"
        )


def config_from_mapping(
    data: Mapping[str, Any], *, base: Path | None = None, environ: Mapping[str, str] | None = None
) -> Config:
    """The validated config of ``data``. ``base``: the directory a relative SQLite path is
    relative to (the config file's), else the working directory. ``database_env`` is read
    from ``environ`` (the process's environment unless given)."""
    _refuse_secrets(data, "")
    data = _with_database(data, base, os.environ if environ is None else environ)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_first_problem(exc)) from None


def _with_database(data: Mapping[str, Any], base: Path | None, environ: Mapping[str, str]) -> Any:
    """``database`` from ``database_env`` when it names one, and a relative SQLite path
    anchored at ``base``: the same file whatever directory the command is run from."""
    data = dict(data)
    name = data.get("database_env")
    if isinstance(name, str) and name:
        if "database" in data:
            raise ConfigError("database_env: set database or database_env, not both")
        url = environ.get(name, "").strip()
        if not url:
            raise ConfigError(f"database_env: environment variable {name} is not set or empty")
        data["database"] = url
    elif "database" not in data:
        return data
    url = data["database"]
    if base is not None and isinstance(url, str) and url.startswith("sqlite:///"):
        path, sep, query = url.removeprefix("sqlite:///").partition("?")
        if path and path != ":memory:" and not Path(path).is_absolute():
            data["database"] = f"sqlite:///{(base / path).resolve()}{sep}{query}"
    return data


def _first_problem(exc: ValidationError) -> str:
    """One line naming the key. An unknown key comes first, with the known key it is
    closest to: a typo (``secret_evn``) would otherwise read as a missing ``secret_env``."""
    errors = exc.errors()
    unknown = [error for error in errors if error["type"] == "extra_forbidden"]
    first = unknown[0] if unknown else errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "config"
    if unknown:
        close = difflib.get_close_matches(str(first["loc"][-1]), _keys_at(first["loc"][:-1]), 1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"{where}: unknown key{hint}"
    return f"{where}: {first['msg'].removeprefix('Value error, ')}"


def _keys_at(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the table at ``loc`` takes, found by walking the models down the path."""
    annotation: Any = Config
    for part in loc:
        annotation = _unwrapped(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return []
            annotation = field.annotation
        elif typing.get_origin(annotation) is dict:
            annotation = typing.get_args(annotation)[1]
        elif typing.get_origin(annotation) in (tuple, list):
            annotation = typing.get_args(annotation)[0]
        else:
            return []
    annotation = _unwrapped(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return list(annotation.model_fields)
    return []


def _unwrapped(annotation: Any) -> Any:
    """``X`` of ``Annotated[X, ...]`` and of ``X | None``."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def resolve_config_path(path: str | None) -> Path:
    return Path(path or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_PATH)


def load_config(path: str | Path | None = None) -> Config:
    """Read and validate a config file; every failure is one :class:`ConfigError` line."""
    file = resolve_config_path(str(path) if path is not None else None)
    try:
        with file.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {file}") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {file} is a directory") from None
    except OSError as exc:
        raise ConfigError(f"config file {file} cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{file}: not valid TOML: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    return config_from_mapping(data, base=file.resolve().parent)


StoreKind = Literal["sqlite", "postgres"]


def store_kind(database: str) -> StoreKind:
    return "sqlite" if database.startswith("sqlite:") else "postgres"
