"""``[destinations.NAME]``: an internal service that forward routes share, with the
pressure it can take and a circuit breaker.

::

    [destinations.crm]
    url = "http://crm.internal/hooks"
    rate_per_second = 20        # a token bucket shared by every worker process
    burst = 40                  # the bucket's size (default: one second's worth, at least 1)
    max_in_flight = 8           # forwards under way at once, across processes and hosts
    circuit_failures = 5        # this many failures in a row open the circuit
    circuit_cooldown = "30s"    # then one probe; a success closes it
    timeout_seconds = 10

    [[sources.stripe.routes]]
    action = "crm"
    destination = "crm"         # instead of forward = "..."

A failure is a forward that got no answer (timeout, refused, DNS), a 5xx or a 429; any
other answer shows the destination is up. A job held by the rate, by ``max_in_flight``
or by an open circuit comes back shortly without spending an attempt.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from hookinbox.config.fields import ForwardUrl, Frozen, parse_duration

_NAME = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


class DestinationConfig(Frozen):
    """One destination (``[destinations.NAME]``)."""

    #: Where its forwards POST.
    url: ForwardUrl
    #: Forwards started per second, across every worker process; unset: no limit.
    rate_per_second: float | None = Field(default=None, gt=0, le=100_000)
    #: The bucket's size: how many may start at once after a quiet spell.
    burst: float | None = Field(default=None, ge=1, le=1_000_000)
    #: Forwards under way at once, across every worker process; unset: no limit.
    max_in_flight: int | None = Field(default=None, ge=1, le=100_000)
    #: Failures in a row that open the circuit; unset: no circuit breaker.
    circuit_failures: int | None = Field(default=None, ge=1, le=10_000)
    #: How long an open circuit holds the destination's jobs before one probe.
    circuit_cooldown: float = Field(default=30.0, gt=0, le=86400)
    #: A forward that takes longer is a failed attempt (``timeout``).
    timeout_seconds: float = Field(default=10.0, gt=0, le=300)

    @field_validator("circuit_cooldown", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float:
        return parse_duration(value)

    @property
    def bucket_size(self) -> float:
        """``burst``, or one second's worth of the rate (at least one)."""
        if self.burst is not None:
            return self.burst
        return max(1.0, self.rate_per_second or 1.0)


def check_destinations(destinations: dict[str, DestinationConfig], sources: dict[str, Any]) -> None:
    """Names are plain; every route's ``destination`` names one that exists."""
    for name in destinations:
        if not _NAME.match(name):
            raise ValueError(f"destinations.{name}: a name may hold only letters, digits, _ and -")
    for source_name, source in sources.items():
        for index, route in enumerate(source.routes):
            if route.destination is not None and route.destination not in destinations:
                raise ValueError(
                    f"sources.{source_name}.routes.{index}.destination: no destination named "
                    f"{route.destination!r}"
                )
