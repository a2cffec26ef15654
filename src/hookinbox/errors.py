"""Every error hookinbox raises on purpose, with a stable code.

The tree::

    HookinboxError
    ├── ConfigError                  config_error       exit 2
    ├── PortInUse                    port_in_use        exit 6
    ├── VerificationError            (HTTP 400)
    │   ├── MissingHeaders           missing_headers
    │   ├── InvalidHeaders           invalid_headers
    │   ├── InvalidSignature         invalid_signature
    │   ├── InvalidCredentials       invalid_credentials
    │   ├── TimestampOutOfTolerance  timestamp_out_of_tolerance
    │   ├── MissingEventId           missing_event_id
    │   ├── InvalidEventId           invalid_event_id
    │   ├── InvalidEventType         invalid_event_type
    │   └── MalformedJson            malformed_json
    │       ├── BodyTooDeep          body_too_deep
    │       ├── NumberOutOfRange     number_out_of_range
    │       ├── NulInBody            nul_in_body
    │       └── MalformedForm        malformed_form
    ├── UnknownSource                unknown_source     HTTP 404
    ├── PayloadTooLarge              payload_too_large  HTTP 413
    ├── SourcePaused                 source_paused      HTTP 503
    ├── StoreError                   store_error        HTTP 503, exit 3
    │   ├── StoreUnavailable         store_unavailable  HTTP 503, exit 3
    │   ├── StoreNotFound            store_not_found    HTTP 503, exit 3
    │   ├── StoreSchemaNewer         store_schema_newer HTTP 503, exit 3
    │   └── StoreRejectedRow         store_rejected_row HTTP 400, exit 3
    ├── NotFound                     not_found          HTTP 404, exit 4
    ├── OperationRefused             refused            HTTP 409, exit 5
    │   ├── PayloadPurged            payload_purged     HTTP 409, exit 5
    │   └── CatchUpNotConfigured     catch_up_not_configured HTTP 409, exit 5
    ├── CatchUpFailed                catch_up_failed    HTTP 502, exit 7 (provider's API)
    │   ├── CatchUpUnauthorized      catch_up_unauthorized HTTP 502, exit 7
    │   └── CatchUpRateLimited       catch_up_rate_limited HTTP 502, exit 7
    ├── InvalidArgument              invalid_argument   HTTP 400, exit 2
    ├── AmbiguousId                  ambiguous_id       HTTP 409, exit 2
    ├── KeyUnavailable               key_unavailable    HTTP 503, exit 7
    ├── Unauthenticated              unauthenticated    HTTP 401
    ├── Forbidden                    forbidden          HTTP 403
    ├── InvalidLoginForm             invalid_form       HTTP 400 (the admin login's body)
    │   ├── LoginFormTooLarge        form_too_large     HTTP 413
    │   └── UnsupportedLoginForm     unsupported_form   HTTP 415
    ├── EffectInProgress             effect_in_progress a job waits for another's effect
    ├── DestinationHeld              (a hold's code)    a forward held, no attempt spent
    └── ActionError                  (its own code)     a failed attempt of a job
        ├── TargetAnswered           http_<status>      a forward's non-2xx answer
        └── PayloadInvalid           payload_invalid    a body the handler cannot take

``EffectInProgress`` (:mod:`hookinbox.work.effects`), ``DestinationHeld``
(:mod:`hookinbox.work.destination_gate`: ``destination_rate``, ``destination_busy`` or
``circuit_open``) and ``PayloadInvalid`` (:mod:`hookinbox.work.handlers`) live beside
the code that raises them; they end an attempt, never a request.

The HTTP layer (``hookinbox.http``) is the only place that maps these to statuses and the
CLI the only place that maps them to exit codes; both read the attributes below. A
docstring is the default message, so ``raise InvalidSignature()`` is enough. Messages
never carry a payload or a secret: only ids, codes and key names.
"""

from __future__ import annotations


class HookinboxError(Exception):
    """hookinbox failed."""

    code: str = "error"
    http_status: int = 500
    exit_code: int = 1

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or self.code).strip())

    @property
    def message(self) -> str:
        return str(self.args[0])


class ConfigError(HookinboxError):
    """The configuration is not valid."""

    code = "config_error"
    exit_code = 2


class PortInUse(HookinboxError):
    """A port hookinbox serve would listen on is already taken by another process."""

    code = "port_in_use"
    exit_code = 6


class VerificationError(HookinboxError):
    """The delivery could not be authenticated."""

    http_status = 400


class MissingHeaders(VerificationError):
    """A header the scheme requires is missing."""

    code = "missing_headers"


class InvalidHeaders(VerificationError):
    """The provider headers kept with the delivery are too many, too large, or hold a
    control character (docs/edge.md)."""

    code = "invalid_headers"


class InvalidSignature(VerificationError):
    """No configured secret produces an offered signature."""

    code = "invalid_signature"


class InvalidCredentials(VerificationError):
    """No configured credential equals the one offered (HTTP Basic, a static API key)."""

    code = "invalid_credentials"


class TimestampOutOfTolerance(VerificationError):
    """The signed timestamp is outside the tolerance window."""

    code = "timestamp_out_of_tolerance"


class MissingEventId(VerificationError):
    """The delivery carries no event id and the source has no fingerprint policy."""

    code = "missing_event_id"


class InvalidEventId(VerificationError):
    """The event id is longer than 255 UTF-8 bytes or holds a control character
    (docs/edge.md)."""

    code = "invalid_event_id"


class InvalidEventType(VerificationError):
    """The event type is longer than 255 UTF-8 bytes or holds a control character
    (docs/edge.md)."""

    code = "invalid_event_type"


class MalformedJson(VerificationError):
    """The body is not a JSON object."""

    code = "malformed_json"


class BodyTooDeep(MalformedJson):
    """The body nests arrays and objects deeper than the limit (docs/edge.md)."""

    code = "body_too_deep"


class NumberOutOfRange(MalformedJson):
    """A number in the body has too many digits or is beyond a double's range."""

    code = "number_out_of_range"


class NulInBody(MalformedJson):
    """A string in the body holds U+0000, which neither store's text can hold."""

    code = "nul_in_body"


class MalformedForm(MalformedJson):
    """The body is not a form (application/x-www-form-urlencoded) by the edge's rules:
    percent-encoded UTF-8, at most 1,000 fields (docs/edge.md)."""

    code = "malformed_form"


class UnknownSource(HookinboxError):
    """No source with that name is configured."""

    code = "unknown_source"
    http_status = 404
    exit_code = 4


class PayloadTooLarge(HookinboxError):
    """The body is larger than the source's max_body_bytes."""

    code = "payload_too_large"
    http_status = 413


class SourcePaused(HookinboxError):
    """The source is paused by an operator; the provider should retry later."""

    code = "source_paused"
    http_status = 503


class StoreError(HookinboxError):
    """The store failed."""

    code = "store_error"
    #: Whatever went wrong in the store, the provider should retry later.
    http_status = 503
    exit_code = 3


class StoreUnavailable(StoreError):
    """The store cannot be reached or could not commit."""

    code = "store_unavailable"
    http_status = 503
    exit_code = 3


class StoreNotFound(StoreError):
    """There is no hookinbox store at the configured URL (no such SQLite file or
    PostgreSQL database, or one without hookinbox's schema). Operator commands never
    create one: a typo in a cron job's URL must fail, not report an empty store as clean.
    ``serve``, ``worker`` and ``migrate`` create and migrate it."""

    code = "store_not_found"
    http_status = 503
    exit_code = 3


class StoreSchemaNewer(StoreError):
    """The store was migrated by a newer hookinbox than this one (``hookinbox migrate``
    with an older release, after a rollback or from a stale image): this release cannot
    say the store is up to date, and may not be able to work on it."""

    code = "store_schema_newer"
    http_status = 503
    exit_code = 3


class StoreRejectedRow(StoreError):
    """The store refused a value of this delivery (the rest of its batch was kept)."""

    code = "store_rejected_row"
    #: The same request would be refused again: a retry cannot help.
    http_status = 400
    exit_code = 3


class NotFound(HookinboxError):
    """No such record."""

    code = "not_found"
    http_status = 404
    exit_code = 4


class OperationRefused(HookinboxError):
    """The operation was refused."""

    code = "refused"
    http_status = 409
    exit_code = 5


class PayloadPurged(OperationRefused):
    """The payload was purged after retention, so the job cannot run again."""

    code = "payload_purged"


class CatchUpNotConfigured(OperationRefused):
    """The source has no [sources.NAME.catch_up] table."""

    code = "catch_up_not_configured"


class CatchUpFailed(HookinboxError):
    """The provider's API could not be read (an outage, an unreachable host, an answer
    that is not what its documentation says); the cursor stays at the last committed
    page, and the next run resumes there."""

    code = "catch_up_failed"
    http_status = 502
    exit_code = 7


class CatchUpUnauthorized(CatchUpFailed):
    """The provider refused the API key (401 or 403): check api_key_env's key and its
    permissions."""

    code = "catch_up_unauthorized"


class CatchUpRateLimited(CatchUpFailed):
    """The provider's rate limit asked for a longer wait than catch_up.max_wait allows, or
    more waits than catch_up.max_retries; the next run resumes at the cursor."""

    code = "catch_up_rate_limited"


class InvalidArgument(HookinboxError):
    """An argument of an operator command is not valid."""

    code = "invalid_argument"
    http_status = 400
    exit_code = 2


class AmbiguousId(HookinboxError):
    """The event id exists in several sources; name the source."""

    code = "ambiguous_id"
    http_status = 409
    exit_code = 2

    def __init__(self, message: str | None = None, *, sources: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        #: The sources that hold the id (names from the config, safe to show).
        self.sources = sources


class KeyUnavailable(HookinboxError):
    """A sealed body, rejected body or answer snippet cannot be opened: the key that
    wrapped it is not in the key ring (``[encryption] keys_env``), or the ring's key of
    that id is not the one that sealed it, or the sealed value is not this row's. Nothing
    garbled is ever shown or forwarded instead: the operator restores the key."""

    code = "key_unavailable"
    #: The server cannot serve it now; with the key restored the same request succeeds.
    http_status = 503
    exit_code = 7


class Unauthenticated(HookinboxError):
    """A valid bearer token is required."""

    code = "unauthenticated"
    http_status = 401


class Forbidden(HookinboxError):
    """The token does not carry the scope this request needs."""

    code = "forbidden"
    http_status = 403


class InvalidLoginForm(HookinboxError):
    """The login form is not urlencoded UTF-8 holding the login's few fields."""

    code = "invalid_form"
    http_status = 400


class LoginFormTooLarge(InvalidLoginForm):
    """The login form is larger than the admin reads."""

    code = "form_too_large"
    http_status = 413


class UnsupportedLoginForm(InvalidLoginForm):
    """The login form must be application/x-www-form-urlencoded, in UTF-8."""

    code = "unsupported_form"
    http_status = 415


class ActionError(HookinboxError):
    """The action failed; the job will be retried or dead-lettered with this code.

    Raise it from a handler with a short code of your own (``crm_unavailable``): the
    code is what the journal, the dead-letter list and the metrics show. The message is
    never logged (it may quote a payload).

    ``not_started=True`` says the effect certainly did not begin (the request never
    reached the other side: a refused connection, a name that does not resolve), so the
    effects ledger releases the key this attempt started instead of leaving it
    "started and never recorded" for reconcile to report."""

    code = "action_failed"

    def __init__(self, code: str, message: str | None = None, *, not_started: bool = False) -> None:
        super().__init__(message or code)
        self.code = code
        self.not_started = not_started


class TargetAnswered(ActionError):
    """A forward's (or a send's) target answered with a non-2xx status.

    It carries what the worker decides by (the status and the ``Retry-After`` wait) and
    what an operator reads in the attempt history: a short, cleaned snippet of the
    target's own answer, never the payload that was sent."""

    def __init__(
        self, status: int, *, retry_after_seconds: float | None = None, snippet: str = ""
    ) -> None:
        super().__init__(f"http_{status}")
        self.status = status
        #: The wait the target asked for (``Retry-After``: seconds or an HTTP date).
        self.retry_after_seconds = retry_after_seconds
        #: At most :data:`hookinbox.outbound.SNIPPET_BYTES` of the answer's body.
        self.snippet = snippet
