"""How long ago a time was, in the words of every surface: the admin's ``5 min ago`` and
the CLI's compact ``5m ago`` are one rule, so the two never disagree on a boundary."""

from __future__ import annotations

from datetime import UTC, datetime

#: Seconds per unit, with the unit's word on a page and in a table's column.
_UNITS = ((86400, "d", "d"), (3600, "h", "h"), (60, "min", "m"), (1, "s", "s"))
#: Past this, a compact time is the date: "143d ago" says less than the day it was.
_COMPACT_DAYS = 100


def relative_time(value: datetime, now: datetime, *, compact: bool = False) -> str:
    """``12 s ago``, ``5 min ago``, ``3 h ago``, ``2 d ago`` (``in 5 min`` ahead), whole
    units rounded down. ``compact`` is a table's: ``12s ago``, ``5m ago``, the date past
    99 days; at most 10 characters, so a time column never wraps."""
    seconds = (now - value).total_seconds()
    ahead, seconds = seconds < 0, abs(seconds)
    if compact and seconds >= _COMPACT_DAYS * 86400:
        return value.astimezone(UTC).strftime("%Y-%m-%d")
    for size, word, short in _UNITS:
        if seconds >= size:
            count = int(seconds // size)
            amount = f"{count}{short}" if compact else f"{count} {word}"
            return f"in {amount}" if ahead else f"{amount} ago"
    return "now"
