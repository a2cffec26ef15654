"""How a route's failed attempts are retried, and how forwards read a target's answer.

::

    [[sources.stripe.routes]]
    action = "crm"
    forward = "http://crm.internal/hooks"
    retry_schedule = ["5s", "1m", "10m", "1h", "6h"]   # 6 attempts in all
    dead_letter_on = [400, 401, 403, 404, 422]         # no retry can help these

A route without ``retry_schedule`` keeps the exponential backoff of ``[worker]``
(``backoff_base_seconds`` doubled per attempt, capped at ``backoff_max_seconds``, up to
``max_attempts``). An explicit schedule lists the waits after the first, second ...
failed attempt; its length bounds the attempts (``len + 1``), so what an operator reads
in the file is exactly what happens. Both are checked here, at start-up: a bad duration
or status is one ``config_error`` line naming the key.
"""

from __future__ import annotations

from typing import Any

from hookinbox.config.fields import parse_duration

#: An explicit schedule has at most this many waits (attempts = waits + 1).
MAX_SCHEDULE = 50
#: The longest single wait of a schedule: a week.
MAX_WAIT_SECONDS = 7 * 86400.0


def parse_schedule(value: Any) -> tuple[float, ...] | None:
    """The waits of ``retry_schedule`` in seconds, each a duration (``"5s"``, ``"1h"``)."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ValueError('retry_schedule must be a list of durations, e.g. ["5s", "1m", "1h"]')
    if not 1 <= len(value) <= MAX_SCHEDULE:
        raise ValueError(f"retry_schedule must list 1 to {MAX_SCHEDULE} waits")
    waits = []
    for index, item in enumerate(value):
        try:
            wait = parse_duration(item)
        except ValueError as exc:
            raise ValueError(f"retry_schedule[{index}]: {exc}") from None
        if wait > MAX_WAIT_SECONDS:
            raise ValueError(f"retry_schedule[{index}]: longer than a week")
        waits.append(wait)
    return tuple(waits)


def check_dead_letter_on(value: tuple[int, ...]) -> tuple[int, ...]:
    """HTTP statuses a retry cannot help: 4xx/5xx only (a 2xx is a success, a 410
    always ends the job as ``gone``)."""
    for status in value:
        if not 400 <= status <= 599:
            raise ValueError(f"dead_letter_on: {status} is not a 4xx or 5xx status")
    if len(set(value)) != len(value):
        raise ValueError("dead_letter_on lists a status twice")
    return value
