"""How the admin shows things: templates, times, the trace timeline, the chart, and the
parsing of what a form or a query string sends.

Nothing here reads the store or decides anything; :mod:`hookinbox.admin.views` hands it
what :mod:`hookinbox.ops` returned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import jinja2
from markupsafe import Markup

from hookinbox import ops
from hookinbox.errors import InvalidArgument
from hookinbox.store import AttemptView
from hookinbox.times import relative_time


def format_time(value: datetime | None) -> str:
    """To the millisecond, UTC: two events in the same second still read in order."""
    if not value:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def time_element(value: datetime | None, now: datetime) -> Markup:
    """A time as the admin shows it: relative (``5 min ago``), the absolute UTC time to
    the millisecond in its title (shown on hover) and its ISO form in ``datetime``."""
    if not value:
        return Markup("")
    iso = value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return Markup('<time datetime="{}" title="{} UTC">{}</time>').format(
        iso, format_time(value), relative_time(value, now)
    )


templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
templates.filters["t"] = format_time


@jinja2.pass_context
def _when(context: Any, value: datetime | None) -> Markup:
    return time_element(value, context["now"])


templates.filters["when"] = _when


#: Unix seconds as the admin takes them: ASCII digits, up to the year 9999.
_UNIX_SECONDS = re.compile(r"[0-9]{1,11}(\.[0-9]{1,6})?")
_LAST_SECOND = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
#: The longest text an admin filter or form field may carry.
MAX_TEXT = 200


def parse_time(value: str | None) -> datetime | None:
    """``2026-01-31T12:00`` (UTC, as an HTML datetime-local input sends it) or unix seconds
    (ASCII digits), from 1970 to the year 9999; anything else is an InvalidArgument (400)."""
    if not value:
        return None
    if _UNIX_SECONDS.fullmatch(value):
        seconds = float(value)
    elif len(value) > 40:  # an ISO time has at most 32 characters
        raise InvalidArgument("not a time")
    else:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            seconds = parsed.timestamp()
        except (ValueError, OverflowError):
            raise InvalidArgument(f"not a time: {value[:40]!r}") from None
    if not 0 <= seconds <= _LAST_SECOND:
        raise InvalidArgument("a time before 1970 or after the year 9999")
    return datetime.fromtimestamp(seconds, UTC)


def form_int(value: object, default: int, *, what: str = "number") -> int:
    """A whole number from a form: ASCII digits (``²`` is a digit to ``str.isdigit``),
    at most nine of them; nothing sent is ``default``; anything else an InvalidArgument."""
    text = str(value or "").strip()
    if not text:
        return default
    if not (len(text) <= 9 and text.isascii() and text.isdigit()):
        raise InvalidArgument(f"the {what} must be a whole number")
    return int(text)


def text_arg(value: object, what: str, *, max_length: int = MAX_TEXT) -> str | None:
    """A filter, an id or a reason as typed: None when empty; an InvalidArgument (400)
    when longer than ``max_length`` or holding a control character, which neither a
    store's text nor an audit line should hold."""
    if value is None:
        return None
    text = str(value)
    if not text:
        return None
    if len(text) > max_length or _CONTROL.search(text):
        raise InvalidArgument(f"the {what} is not valid")
    return text


#: The longest flash message a redirect carries.
MAX_FLASH = 600
#: The refused jobs a bulk retry's flash names one by one; the rest are counted.
FLASH_REFUSED = 10


@dataclass(frozen=True, slots=True)
class Flash:
    """The outcome of an action, carried by its redirect to the GET page that shows it
    (``?kind=done&flash=...``, signed for the session by the view)."""

    kind: Literal["done", "problem"]
    text: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.text}"

    @classmethod
    def of(cls, kind: Literal["done", "problem"], text: str) -> Flash:
        """A flash that survives the round trip: control characters made spaces, cut
        to MAX_FLASH (what :meth:`from_query` accepts back)."""
        return cls(kind, _CONTROL.sub(" ", text)[:MAX_FLASH])

    def query(self) -> dict[str, str]:
        return {"kind": self.kind, "flash": self.text}

    @classmethod
    def from_query(cls, params: Mapping[str, str]) -> Flash | None:
        kind, text = params.get("kind", ""), params.get("flash", "")
        if kind not in ("done", "problem") or not text or len(text) > MAX_FLASH:
            return None
        if _CONTROL.search(text):
            return None
        return cls("done" if kind == "done" else "problem", text)


def retry_summary(results: Sequence[tuple[str, str | None]]) -> str:
    """One line for a bulk retry: how many were requeued, and which were refused and
    why (the first few by job id and error code, the rest counted)."""
    refused = [(job, code) for job, code in results if code]
    text = f"retried {len(results)} dead letter(s): {len(results) - len(refused)} requeued"
    if refused:
        named = ", ".join(f"{job} ({code})" for job, code in refused[:FLASH_REFUSED])
        more = len(refused) - FLASH_REFUSED
        text += f"; {len(refused)} refused: {named}" + (f" and {more} more" if more > 0 else "")
    return text[:MAX_FLASH]


def pretty_body(body: bytes) -> str:
    try:
        return json.dumps(json.loads(body), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):  # a body stored before the edge's depth limit
        return body.decode("utf-8", errors="replace")


def timeline(traced: ops.DeliveryTrace) -> list[dict[str, Any]]:
    """Everything that happened to one delivery, oldest first."""
    d = traced.delivery
    events: list[dict[str, Any]] = [
        {"at": d.first_seen_at, "kind": "receipt", "what": "first received", "detail": ""},
    ]
    if d.delivery_count > 1:
        detail = f"{d.delivery_count} deliveries in all"
        if d.conflicts:
            detail += f", {d.conflicts} with a different body"
        events.append(
            {"at": d.last_seen_at, "kind": "receipt", "what": "last received", "detail": detail}
        )
    for job in traced.jobs:
        for attempt in job.attempts:
            events.append(
                {
                    "at": attempt.started_at,
                    "kind": "attempt",
                    "what": f"{job.job.action} attempt {attempt.number} ({attempt.trigger})",
                    "detail": " ".join(
                        x for x in (attempt.outcome or "running", attempt.error_code or "") if x
                    ),
                    "error": bool(attempt.error_code),
                    "attempt": attempt_facts(attempt),
                }
            )
    for effect in traced.effects:
        events.append(
            {
                "at": effect.created_at,
                "kind": "effect",
                "what": effect.key,
                "detail": effect_state(effect.state),
            }
        )
    for action in traced.operator_actions:
        events.append(
            {
                "at": action.at,
                "kind": "operator",
                "what": f"{action.command} by {action.actor}",
                "detail": action.detail or "",
            }
        )
    for layer, rows in traced.layers.items():
        for row in rows:
            at = row.get("at") or row.get("created_at")
            when = at if isinstance(at, datetime) else _maybe_time(at)
            events.append(
                {
                    "at": when,
                    "kind": layer,
                    "what": str(row.get("what") or row.get("key") or row.get("id") or layer),
                    "detail": str(row.get("detail") or row.get("state") or ""),
                }
            )
    epoch = datetime.fromtimestamp(0, UTC)
    return sorted(events, key=lambda e: e["at"] or epoch)


def attempt_facts(attempt: AttemptView) -> list[tuple[str, str]]:
    """What one attempt met, as (label, text) pairs for the timeline: its target, the
    status it got, how long it took, when the job is due again and the start of the
    target's answer (bounded and cleaned when stored; escaped by the template)."""
    facts = []
    if attempt.target:
        facts.append(("target", attempt.target))
    if attempt.http_status is not None:
        facts.append(("status", str(attempt.http_status)))
    if attempt.duration_ms is not None:
        facts.append(("took", f"{attempt.duration_ms} ms"))
    if attempt.next_attempt_at is not None and attempt.outcome in ("retry", "deferred"):
        facts.append(("next", format_time(attempt.next_attempt_at)))
    if attempt.response_snippet:
        facts.append(("answer", attempt.response_snippet))
    return facts


def effect_state(state: str) -> str:
    """A ``started`` ledger row is a call begun, not an effect made: for a forward that
    never connected nothing happened at the target (the attempt row says why)."""
    return "recorded" if state == "recorded" else "started, not recorded (see the attempts)"


def _maybe_time(value: object) -> datetime | None:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


#: Receipt kinds stacked in one bar, bottom to top; failed attempts are a bar beside it.
RECEIPTS = ("accepted", "duplicate", "rejected")


def chart(minutes: list[dict[str, int]]) -> dict[str, Any]:
    """The overview's chart as SVG pieces: per minute, a stacked bar of receipts
    (accepted, duplicate, rejected) and a bar of failed job attempts beside it, on one
    scale, with a y axis (0, half, peak per minute) and an x axis (a label every 15
    minutes, UTC). Drawn in a viewBox, so it scales to the page's width."""
    slot, bar, fail, height = 12, 7, 4, 100
    # Room for labels drawn up to 23 units high (a phone's page; see base.html).
    left, bottom, top = 54, 30, 12
    peak = max(
        (max(sum(m.get(k, 0) for k in RECEIPTS), m.get("failed", 0)) for m in minutes),
        default=0,
    )
    scale = height / peak if peak else 0
    bars: list[dict[str, Any]] = []
    x_labels: list[dict[str, Any]] = []
    for index, minute in enumerate(minutes):
        x = left + index * slot
        label = datetime.fromtimestamp(minute["minute"] * 60, UTC).strftime("%H:%M")
        y: float = top + height
        for kind in RECEIPTS:
            count = minute.get(kind, 0)
            if count:
                h = max(1.0, count * scale)
                y -= h
                bars.append(_bar(x, y, bar, h, kind, f"{label} UTC {kind}: {count}"))
        failed = minute.get("failed", 0)
        if failed:
            h = max(1.0, failed * scale)
            text = f"{label} UTC failed attempts: {failed}"
            bars.append(_bar(x + bar, top + height - h, fail, h, "failed", text))
        if index == len(minutes) - 1:
            x_labels.append({"x": x + slot, "text": label, "anchor": "end"})
        elif index % 15 == 0:
            x_labels.append({"x": x, "text": label, "anchor": "start" if not index else "middle"})
    y_labels = [
        {"y": round(top + height - value * scale, 1), "text": str(value)}
        for value in sorted({0, peak // 2, peak})
        if peak or value == 0
    ]
    width = left + len(minutes) * slot + 4
    return {
        "bars": bars,
        "width": width,
        "height": top + height + bottom,
        "plot": {"left": left, "top": top, "bottom": top + height, "right": width - 4},
        "x_labels": x_labels,
        "y_labels": y_labels,
        "peak": peak,
        "failed": sum(m.get("failed", 0) for m in minutes),
    }


def _bar(x: float, y: float, w: float, h: float, kind: str, title: str) -> dict[str, Any]:
    return {"x": x, "y": round(y, 1), "w": w, "h": round(h, 1), "kind": kind, "title": title}
