"""One attempt as a line of text, the same in ``trace`` and ``deliveries show``: when it
ran (to the millisecond), how it ended, what it met (target, status, duration), when the
job is due again, and the start of the target's answer."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def ms(value: str | None) -> str:
    """An ISO time from a record's JSON, cut to the millisecond (``…:08.123Z``)."""
    if not value:
        return ""
    when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def attempt_line(a: dict[str, Any]) -> str:
    """``a``: an attempt's ``as_json()``."""
    parts = [
        f"#{a['number']} {a['trigger']:<9} {ms(a['started_at'])}",
        a["outcome"] or "running",
    ]
    if a.get("error_code"):
        parts.append(a["error_code"])
    if a.get("http_status") is not None:
        parts.append(f"status={a['http_status']}")
    if a.get("target"):
        parts.append(f"target={a['target']}")
    if a.get("duration_ms") is not None:
        parts.append(f"took={a['duration_ms']}ms")
    if a.get("next_attempt_at") and a["outcome"] in ("retry", "deferred"):
        parts.append(f"next={ms(a['next_attempt_at'])}")
    if a.get("response_snippet"):
        parts.append(f"answer={a['response_snippet'][:120]!r}")
    return "  ".join(parts)
