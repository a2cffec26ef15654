"""One catch-up run of one source: pages from the provider's API, each reserved with the
cursor in one commit.

The run starts where the source's cursor says (or where an interrupted run stopped, or
``window`` ago at most), walks the provider's pages newest first down to that position,
and hands every pulled event to the receiver's own step (:meth:`Receiver.pulled`: body
reading, edge checks, routes, filters), then to the store (``commit_page``: the same
reservation as a webhook, the event ids the journal already holds left alone, the rows
marked ``origin = catch_up``, the cursor moved by compare-and-set). It is bounded by
``max_pages``, the provider's pacing and rate-limit waits; an outage ends it with the
cursor at the last committed page, and the next run resumes there. What it did is
reported (pulled, already_had, new, requested), counted in
``hookinbox_catch_up_events_total`` and logged (ids, counts and codes only: never a
payload, never the key).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from hookinbox.catch_up.github_deliveries import GitHubDeliveries
from hookinbox.catch_up.provider import Pacer, Provider, PulledEvent, Sleep
from hookinbox.config import Config
from hookinbox.config.catch_up import CatchUpSettings
from hookinbox.errors import (
    CatchUpFailed,
    CatchUpNotConfigured,
    ConfigError,
    HookinboxError,
    SourcePaused,
    UnknownSource,
)
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.receive.receiver import Receiver
from hookinbox.resources.service import log_outcome
from hookinbox.store import CursorMove, PageEntry, Store, iso

log = get_logger("hookinbox.catch_up")

#: New delivery ids a report lists, at most (the counts are always whole).
REPORT_IDS = 100

ProviderFactory = Callable[[CatchUpSettings, str, str, Pacer, bool], Provider]


def build_provider(
    settings: CatchUpSettings, api_key: str, source: str, pacer: Pacer, dry_run: bool
) -> Provider:
    """The client of the source's provider (its SDK's, or httpx for GitHub). The SDKs are
    optional extras, imported only by a source that catches up through them."""
    if settings.provider == "github":
        return GitHubDeliveries(settings, api_key, source, pacer, dry_run=dry_run)
    try:
        if settings.provider == "stripe":
            from hookinbox.catch_up.stripe_events import StripeEvents

            return StripeEvents(settings, api_key, source, pacer)
        from hookinbox.catch_up.svix_recover import SvixRecover

        return SvixRecover(settings, api_key, source, pacer, dry_run=dry_run)
    except ImportError as exc:
        raise ConfigError(
            f"sources.{source}.catch_up: provider {settings.provider!r} needs its SDK "
            f"(pip install 'hookinbox[{settings.provider}]'): {exc.name} is not installed"
        ) from None


@dataclass
class CatchUpReport:
    """What one run did. ``failure``: the provider's error that ended it (the pages
    before it are committed); the caller shows the report, then raises it."""

    source: str
    provider: str
    dry_run: bool
    floor: int
    pages: int = 0
    pulled: int = 0
    already_had: int = 0
    new: int = 0
    requested: int = 0
    delivered: int = 0
    refused: int = 0
    complete: bool = False
    #: Why the run ended before the floor: ``max_pages``, ``cursor_moved`` (another run
    #: moved the cursor), or the failure's code.
    stopped: str | None = None
    #: The position the cursor holds after the run (unix seconds), None if never set.
    position: int | None = None
    waited_seconds: float = 0.0
    new_delivery_ids: list[str] = field(default_factory=list)
    failure: CatchUpFailed | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "provider": self.provider,
            "dry_run": self.dry_run,
            "floor": _iso(self.floor),
            "pages": self.pages,
            "pulled": self.pulled,
            "already_had": self.already_had,
            "new": self.new,
            "requested": self.requested,
            "delivered": self.delivered,
            "refused": self.refused,
            "complete": self.complete,
            "stopped": self.stopped,
            "cursor": _iso(self.position),
            "waited_seconds": round(self.waited_seconds, 3),
            "new_delivery_ids": self.new_delivery_ids,
            "error": self.failure.code if self.failure else None,
        }

    def summary(self) -> str:
        """The counts as the cursor row keeps them (JSON text, no payload)."""
        kept = ("pages", "pulled", "already_had", "new", "requested", "complete", "stopped")
        data = {k: v for k, v in self.as_json().items() if k in kept}
        data["at"] = iso(datetime.now(UTC))
        return orjson.dumps(data).decode()


def _iso(seconds: int | None) -> str | None:
    return iso(datetime.fromtimestamp(seconds, UTC)) if seconds is not None else None


def settings_of(config: Config, source: str) -> CatchUpSettings:
    found = config.source(source)
    if found is None:
        raise UnknownSource(f"no source {source!r} in the config")
    if found.catch_up is None:
        raise CatchUpNotConfigured(f"source {source!r} has no [sources.{source}.catch_up] table")
    return found.catch_up


async def run_catch_up(
    config: Config,
    store: Store,
    receiver: Receiver,
    metrics: Metrics,
    source: str,
    *,
    since: datetime | None = None,
    dry_run: bool = False,
    clock: Callable[[], float] = time.time,
    sleep: Sleep = asyncio.sleep,
    providers: ProviderFactory = build_provider,
) -> CatchUpReport:
    """One run for ``source``. ``since``: look from then (within ``window``) instead of
    the cursor, and leave the cursor alone (a one-off look). ``dry_run``: list and
    compare with the journal, reserve and request nothing, move no cursor."""
    settings = settings_of(config, source)
    api_key = settings.api_key()
    if not api_key:
        raise ConfigError(
            f"sources.{source}.catch_up.api_key_env: environment variable "
            f"{settings.api_key_env} is not set or empty"
        )
    if any(s.source == source and s.paused for s in await store.sources.list_source_states()):
        raise SourcePaused(f"source {source!r} is paused: resume it before catching up")
    now = int(clock())
    window_floor = now - int(settings.window)
    cursor = await store.catch_up.get(source)
    version = cursor.version if cursor is not None else 0
    position = cursor.position if cursor is not None else None
    after: str | None = None
    ceiling: int | None = None
    if since is not None:
        floor = max(int(since.timestamp()), window_floor)
    else:
        floor = max(position if position is not None else window_floor, window_floor)
        if cursor is not None and cursor.resume_after is not None:
            after, ceiling = cursor.resume_after, cursor.resume_ceiling
    keeps_cursor = since is None and not dry_run
    assert settings.provider is not None
    report = CatchUpReport(source, settings.provider, dry_run, floor, position=position)
    pacer = Pacer(settings, sleep=sleep)
    provider = providers(settings, api_key, source, pacer, dry_run)
    log.info("catch_up_started", source=source, provider=settings.provider, floor=floor)
    try:
        for _ in range(settings.max_pages):
            page = await provider.page(floor=floor, after=after)
            report.pages += 1
            if page.newest_at is not None:
                ceiling = max(ceiling or page.newest_at, page.newest_at)
            events = _unique(page.events)
            report.pulled += len(events)
            report.requested += page.requested
            report.delivered += page.delivered
            move: CursorMove | None = None
            if keeps_cursor:
                if page.done:
                    done_at = max(position or floor, ceiling or floor)
                    move = CursorMove(done_at, None, None, None)
                else:
                    move = CursorMove(position or floor, page.next_after, ceiling, None)
            if dry_run:
                known = await store.catch_up.known_events(source, [e.event_id for e in events])
                had = sum(e.event_id in known for e in events)
                report.already_had += had
                report.new += len(events) - had
            else:
                entries = _entries(receiver, source, events, report)
                if move is not None:
                    report.complete = page.done
                    move = CursorMove(
                        move.position, move.resume_after, move.resume_ceiling, report.summary()
                    )
                committed = await store.catch_up.commit_page(
                    source, entries, expected_version=version, move=move
                )
                _count(committed.reservations, entries, report, metrics, source)
                for delivery_id, outcome in committed.outcomes:
                    log_outcome(outcome, metrics, delivery_id=delivery_id, source=source)
                if move is not None and not committed.cursor_moved:
                    report.complete = False
                    report.stopped = "cursor_moved"
                    break
                version = committed.version
                if move is not None:
                    report.position = move.position
            if not dry_run:
                metrics.caught_up(source, "pulled", len(events))
                metrics.caught_up(source, "requested", page.requested)
            log.info(
                "catch_up_page",
                source=source,
                page=report.pages,
                pulled=len(events),
                requested=page.requested,
                delivered=page.delivered,
            )
            if page.done:
                report.complete = True
                break
            after = page.next_after
        else:
            report.stopped = "max_pages"
    except CatchUpFailed as exc:
        report.failure = exc
        report.stopped = exc.code
        report.complete = False
        log.warning("catch_up_failed", source=source, error=exc.code, pages=report.pages)
    finally:
        report.waited_seconds = pacer.waited
        await provider.aclose()
    log.info(
        "catch_up_finished",
        source=source,
        pulled=report.pulled,
        already_had=report.already_had,
        new=report.new,
        requested=report.requested,
        complete=report.complete,
        stopped=report.stopped,
    )
    return report


def _unique(events: list[PulledEvent]) -> list[PulledEvent]:
    seen: set[str] = set()
    found = []
    for event in events:
        if event.event_id not in seen:
            seen.add(event.event_id)
            found.append(event)
    return found


def _entries(
    receiver: Receiver, source: str, events: list[PulledEvent], report: CatchUpReport
) -> list[PageEntry]:
    """Each event as the receiver builds a webhook's delivery; one it would refuse
    (a body that is not a JSON object, an id it cannot store) is counted and left out."""
    entries = []
    for event in events:
        try:
            item, applies = receiver.pulled(
                source,
                event.body,
                event.headers,
                event_id=event.event_id,
                event_type=event.event_type,
            )
        except HookinboxError as exc:
            report.refused += 1
            log.warning("catch_up_refused", source=source, event_id=event.event_id, error=exc.code)
            continue
        entries.append(PageEntry(item, applies))
    return entries


def _count(
    reservations: tuple[Any, ...],
    entries: list[PageEntry],
    report: CatchUpReport,
    metrics: Metrics,
    source: str,
) -> None:
    new = had = 0
    for entry, reservation in zip(entries, reservations, strict=True):
        if reservation is not None and reservation.outcome == "accepted":
            new += 1
            if len(report.new_delivery_ids) < REPORT_IDS:
                report.new_delivery_ids.append(reservation.delivery_id)
            log.info(
                "caught_up",
                source=source,
                event_id=entry.delivery.event_id,
                type=entry.delivery.event_type,
                delivery_id=reservation.delivery_id,
                origin="catch_up",
            )
        else:
            had += 1
    report.new += new
    report.already_had += had
    metrics.caught_up(source, "new", new)
    metrics.caught_up(source, "already_had", had)
