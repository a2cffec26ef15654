"""The one backoff: how long to wait before trying again, after ``attempt`` tries.

Exponential in the attempt number (``base · 2^(attempt-1)``), capped at ``cap``. With an
``rng``, the wait is jittered over the upper half of that (``[d/2, d)``), so a burst of
failures does not come back as a burst; without one it is exact (for re-checks whose
schedule an operator may want to predict, such as a parked event's).
"""

from __future__ import annotations

import random


def backoff_seconds(
    attempt: int, *, base: float, cap: float, rng: random.Random | None = None
) -> float:
    """Seconds to wait after ``attempt`` (1 = the first try) failed or found nothing."""
    ceiling = min(cap, base * 2 ** max(0, attempt - 1))
    if rng is None:
        return float(ceiling)
    return float(ceiling * (0.5 + 0.5 * rng.random()))


#: Jitter source for the workers and the relay (a module-level Random, as random's own).
JITTER = random.Random()
