"""Rejected deliveries: keep refusals for a signature or a timestamp, and check them again.

:class:`RejectedKeeper` is called by the receiver when a delivery is refused as
``invalid_signature`` or ``timestamp_out_of_tolerance``. It keeps what a later check
needs -- the raw body (up to ``[rejected] max_body_bytes``) and the headers a scheme
reads -- and never a credential. A flood of forged requests cannot make it write without
bound: each source has a token bucket of ``per_minute`` writes in memory, checked before
any store work; at most :data:`MAX_WRITES_IN_FLIGHT` writes run at once (the rest are
dropped and counted); and the store keeps one row per (source, body) in a ring per
source bounded in rows and bytes (:mod:`hookinbox.store.rejected_deliveries`). The write never
delays the 400: it runs after the answer, in the background.

What is kept of the headers: the content type, the provider headers a delivery keeps
(docs/edge.md: ``webhook-``, ``stripe-``, ``x-github-``...), the headers the source's
scheme or fingerprint reads (an ``hmac`` source's signature, timestamp and id headers),
and the query string (twilio signs it) -- minus every credential header of every source
(``Authorization``, cookies, ``X-Api-Key``, any ``api-key`` source's key header, whichever
source the refusal is for), bounded as the edge bounds kept headers.

The retry is :mod:`hookinbox.receive.rejected_retry`.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Mapping

from hookinbox.codes import error_code_of
from hookinbox.config import Config, Source
from hookinbox.config.rejected import RejectedSettings
from hookinbox.errors import HookinboxError
from hookinbox.ids import new_rejected_id
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.payload import BodyFormat, string_at
from hookinbox.redaction import keyed_hash
from hookinbox.store import NewRejected, Store
from hookinbox.verify import edge
from hookinbox.verify.base import QUERY
from hookinbox.verify.bodies import body_format
from hookinbox.verify.registry import credential_headers

log = get_logger("hookinbox.rejected")

#: The refusals worth a second look after a secret is fixed.
KEPT_REASONS = frozenset({"invalid_signature", "timestamp_out_of_tolerance"})
#: Writes of rejected deliveries running at once in one process; more are dropped.
MAX_WRITES_IN_FLIGHT = 8
#: The longest query string kept (twilio signs it).
MAX_QUERY_BYTES = 4096


def read_headers(source: Source) -> frozenset[str]:
    """Headers the source's scheme options and fingerprint name."""
    names: set[str] = set()
    for options in (source.hmac, source.credentials, source.twilio):
        if options is None:
            continue
        for attribute in ("header", "timestamp_header", "id_header", "type_header"):
            value = getattr(options, attribute, None)
            if isinstance(value, str):
                names.add(value)
    if source.fingerprint is not None:
        names.update(source.fingerprint.headers)
    return frozenset(names)


def headers_to_keep(
    headers: Mapping[str, str], wanted: frozenset[str], credentials: frozenset[str]
) -> dict[str, str]:
    """The headers a later check needs, no credential, within the edge's bounds (past
    them, the rest is left out rather than the row refused)."""
    kept: dict[str, str] = {}
    total = 0
    for name, value in headers.items():
        if name in credentials:
            continue
        if name == QUERY:
            if len(value) <= MAX_QUERY_BYTES:
                kept[name] = value
            continue
        if not (
            name == "content-type" or name in wanted or name.startswith(edge.KEPT_HEADER_PREFIXES)
        ):
            continue
        size = len(name) + len(value)
        if (
            len(value) > edge.MAX_HEADER_VALUE_BYTES
            or total + size > edge.MAX_KEPT_HEADER_BYTES
            or len(kept) >= edge.MAX_KEPT_HEADERS
        ):
            continue
        kept[name] = value
        total += size
    return kept


class _Bucket:
    __slots__ = ("stamp", "tokens")

    def __init__(self, tokens: float, stamp: float) -> None:
        self.tokens = tokens
        self.stamp = stamp


class RejectedKeeper:
    """Keeps refused deliveries, bounded (see the module docstring)."""

    def __init__(
        self,
        config: Config,
        store: Store,
        metrics: Metrics,
        *,
        clock: Callable[[], float] = time.monotonic,
        hash_key: bytes | None = None,
    ) -> None:
        self._settings: RejectedSettings = config.rejected
        #: Where each source's data subject is, and how its bodies read: a kept body's
        #: subject hash lets ``hookinbox erase`` find it (signed or not, best effort).
        self._subjects: dict[str, tuple[str, BodyFormat]] = {
            name: (source.subject, body_format(source))
            for name, source in config.sources.items()
            if source.subject is not None
        }
        self._hash_key = hash_key
        self._store = store
        self._metrics = metrics
        self._clock = clock
        self._wanted = {name: read_headers(source) for name, source in config.sources.items()}
        #: Every source's credential headers and the standard ones, for every source.
        self._credentials = credential_headers(config.sources)
        self._buckets: dict[str, _Bucket] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def offer(self, source: str, reason: str, body: bytes, headers: Mapping[str, str]) -> None:
        """Keep this refusal if it is one worth keeping and the bounds allow; never raises,
        never waits."""
        if reason not in KEPT_REASONS or source not in self._wanted:
            return
        if not self._settings.keep:
            self._metrics.rejected_delivery(source, reason, "off")
            return
        if not self._take(source):
            self._metrics.rejected_delivery(source, reason, "rate_limited")
            return
        if len(self._tasks) >= MAX_WRITES_IN_FLIGHT:
            self._metrics.rejected_delivery(source, reason, "busy")
            return
        fits = len(body) <= self._settings.max_body_bytes
        item = NewRejected(
            id=new_rejected_id(),
            source=source,
            reason=reason,
            body_sha256=hashlib.sha256(body).hexdigest(),
            body=body if fits else None,
            body_bytes=len(body),
            headers=headers_to_keep(headers, self._wanted[source], self._credentials),
            subject_hash=self._subject_hash(source, body, headers) if fits else None,
        )
        task = asyncio.get_running_loop().create_task(self._write(item, fits))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _subject_hash(self, source: str, body: bytes, headers: Mapping[str, str]) -> str | None:
        """The keyed hash of the refused body's subject, when the source names one and
        the body parses as the source's bodies do; else None (never an error: the body
        is unsigned, whatever it holds)."""
        found = self._subjects.get(source)
        if found is None or self._hash_key is None:
            return None
        pointer, reader = found
        try:
            subject = string_at(reader.parse(body, headers.get("content-type")), pointer)
        except (HookinboxError, ValueError, RecursionError):
            return None
        return keyed_hash(self._hash_key, subject) if subject is not None else None

    def _take(self, source: str) -> bool:
        """A token from the source's bucket: ``per_minute`` a minute, as a burst or spread."""
        now = self._clock()
        rate = self._settings.per_minute
        bucket = self._buckets.get(source)
        if bucket is None:
            bucket = self._buckets[source] = _Bucket(float(rate), now)
        bucket.tokens = min(float(rate), bucket.tokens + (now - bucket.stamp) * rate / 60.0)
        bucket.stamp = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    async def _write(self, item: NewRejected, fits: bool) -> None:
        settings = self._settings
        try:
            rejected_id = await self._store.rejected.keep_rejected(
                item,
                max_rows=settings.max_rows_per_source,
                max_bytes=settings.max_bytes_per_source,
            )
        except Exception as exc:  # a store that is away loses this copy; the 400 went out
            self._metrics.rejected_delivery(item.source, item.reason, "store_error")
            log.warning("rejected_not_kept", source=item.source, error=error_code_of(exc))
            return
        outcome = "kept" if fits else "kept_without_body"
        self._metrics.rejected_delivery(item.source, item.reason, outcome)
        log.info(
            "rejected_kept",
            source=item.source,
            reason=item.reason,
            rejected_id=rejected_id,
            body_sha256=item.body_sha256,
            body_kept=fits,
        )

    async def drain(self) -> None:
        """Wait for the writes under way (at shutdown, before the store closes)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
