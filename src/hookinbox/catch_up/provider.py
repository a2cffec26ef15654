"""What every provider's client hands the run: pages of pulled events, newest first, and
the pacing and rate-limit rule they all keep.

A provider lists newest first (Stripe's events, GitHub's deliveries), so a run walks from
the newest event down to the cursor's position; its page token (``after``) says where an
interrupted run stopped. Requests are paced (``rate`` per second); a rate-limit answer is
waited out (``Retry-After``, GitHub's ``x-ratelimit-reset``) when the wait is at most
``max_wait`` and fewer than ``max_retries`` waits were spent, else the run ends with
``catch_up_rate_limited``. Nothing here logs or keeps the API key.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from hookinbox.config.catch_up import CatchUpSettings
from hookinbox.errors import CatchUpRateLimited
from hookinbox.logs import get_logger

log = get_logger("hookinbox.catch_up")

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class PulledEvent:
    """One event as the provider's API gave it: its body and the headers a webhook of it
    would carry (never a signature: the body is the API's rendering, not the signed
    bytes)."""

    event_id: str
    event_type: str
    body: bytes
    headers: dict[str, str]
    #: When the provider created (or first delivered) it, unix seconds of its clock.
    at: int


@dataclass(frozen=True, slots=True)
class ProviderPage:
    """One page of a run."""

    #: Events to reserve here (not yet delivered, as far as the provider says).
    events: list[PulledEvent] = field(default_factory=list)
    #: Redeliveries or recoveries asked of the provider (it then sends signed webhooks).
    requested: int = 0
    #: Events of the page the provider says were delivered (not pulled).
    delivered: int = 0
    #: The newest time on the page (the run's ceiling, from its first page).
    newest_at: int | None = None
    #: The token of the next (older) page; None when this one was the last.
    next_after: str | None = None
    #: The walk reached the floor (or the end of the list): the run is complete.
    done: bool = True


class Provider(Protocol):
    """A provider's API, a page at a time."""

    async def page(self, *, floor: int, after: str | None) -> ProviderPage:
        """The page after ``after`` (the newest when None), of events at or after
        ``floor`` (unix seconds). Raises a CatchUpFailed."""
        ...

    async def aclose(self) -> None: ...


class Pacer:
    """At most ``rate`` requests a second, and the bounded waits of rate limits."""

    def __init__(self, settings: CatchUpSettings, *, sleep: Sleep = asyncio.sleep) -> None:
        self._interval = 1.0 / settings.rate
        self._max_wait = settings.max_wait
        self._retries_left = settings.max_retries
        self._sleep = sleep
        self._next = 0.0
        #: Seconds spent waiting for rate limits in this run.
        self.waited = 0.0

    async def turn(self) -> None:
        """Wait for the next request's turn."""
        now = time.monotonic()
        if self._next > now:
            await self._sleep(self._next - now)
        self._next = max(now, self._next) + self._interval

    async def rate_limited(self, wait: float | None, source: str) -> None:
        """The provider asked to wait ``wait`` seconds (None: it did not say; a short
        backoff then). Raises CatchUpRateLimited past the bounds."""
        attempt = self._retries_left
        if wait is None:
            wait = min(self._max_wait, 2.0 ** max(0, 5 - attempt))
        wait = max(0.0, wait)
        if self._retries_left <= 0 or wait > self._max_wait:
            raise CatchUpRateLimited(
                f"the provider asked to wait {wait:.0f}s (catch_up.max_wait "
                f"{self._max_wait:.0f}s, {self._retries_left} waits left)"
            )
        self._retries_left -= 1
        log.warning("catch_up_rate_limited", source=source, wait_seconds=round(wait, 3))
        self.waited += wait
        await self._sleep(wait)
