"""Finding deliveries as an operator types them: the one search the CLI, the admin page
and the JSON API share.

What a person pastes is rarely the stored form, so the query is read leniently and then
run exactly: an id with spaces around it, a job id (``dlv_...:action``) for its
delivery, an event type as a prefix (``order``) or a glob in the config's own syntax
(``order.*``, ``*.failed``), in any case; times as durations (``24h`` ago), ISO times or
unix seconds. A payload field filter (``data.object.customer = cus_123``) reads retained
payloads only, inside a time window of at most :data:`MAX_PAYLOAD_WINDOW`, so its cost
is bounded by the payloads kept in that window (payloads are purged soon after
processing). Every page is a keyset page; the count stops at :data:`COUNT_CAP`.

With an encryption key ring configured, SQL cannot see into a sealed body: a payload
filter then reads every retained payload of its window, opens it and matches it in
Python (docs/operations/encryption.md gives the cost), still within the same window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from hookinbox.config import Config, parse_duration
from hookinbox.errors import AmbiguousId, InvalidArgument, NotFound
from hookinbox.store import (
    JOB_STATES,
    DeliverySearch,
    DeliveryStatus,
    DeliveryView,
    PayloadMatch,
    Store,
)

#: The most deliveries one page shows (the CLI's bound; the API's pages are smaller).
MAX_PAGE = 10_000
#: A count of matches stops here (shown as "1000+"): counting never walks further.
COUNT_CAP = 1000
#: The widest window a payload filter reads, and the one it reads when none is given.
MAX_PAYLOAD_WINDOW = timedelta(days=7)
DEFAULT_PAYLOAD_WINDOW = timedelta(hours=24)
#: The longest id, type or filter a search takes.
MAX_TERM = 300

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_JOB_ID = re.compile(r"(dlv_[0-9a-f]{32}):[^:]+")
_UNIX_SECONDS = re.compile(r"[0-9]{1,11}(\.[0-9]{1,6})?")
_DIGITS = re.compile(r"[0-9]+(\.[0-9]+)?")
_LAST_SECOND = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MAX_DEPTH = 8


def clean_term(value: object, what: str, *, max_length: int = MAX_TERM) -> str | None:
    """A term as typed, spaces around it dropped: None when empty (the admin's forms send
    every field, empty for "any"; the API refuses an empty one before it gets here);
    InvalidArgument when too long or holding a control character (neither a store's text
    nor an audit line should hold one)."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    if len(text) > max_length or _CONTROL.search(text):
        raise InvalidArgument(f"the {what} is not valid")
    return text


#: What each list's page cursor (the last id of the page before) looks like.
DELIVERY_CURSOR = re.compile(r"dlv_[0-9a-f]{32}")
JOB_CURSOR = re.compile(r"dlv_[0-9a-f]{32}:[^:\s]+")
REJECTED_CURSOR = re.compile(r"rej_[0-9a-f]{32}")


def page_cursor(value: object, form: re.Pattern[str], what: str) -> str | None:
    """A page cursor as the list before handed it out (``next_before``); anything else is
    InvalidArgument, never a page read from the wrong place."""
    text = clean_term(value, "page cursor")
    if text is not None and not form.fullmatch(text):
        raise InvalidArgument(f"the page cursor is not {what}")
    return text


def delivery_ref(value: object) -> str | None:
    """A delivery id or an event id as pasted: trimmed; a job id becomes its delivery's."""
    ref = clean_term(value, "id")
    if ref is None:
        return None
    job = _JOB_ID.fullmatch(ref)
    return job.group(1) if job else ref


def parse_when(
    value: object, what: str = "time", *, now: datetime | None = None
) -> datetime | None:
    """``24h`` (that long before now), an ISO time (UTC when bare) or unix seconds, from
    1970 to the year 9999; None when empty; anything else InvalidArgument."""
    text = clean_term(value, what, max_length=40)
    if text is None:
        return None
    now = now or datetime.now(UTC)
    if _UNIX_SECONDS.fullmatch(text):
        seconds = float(text)
        if seconds > _LAST_SECOND.timestamp():
            raise InvalidArgument(f"{what}: after the year 9999")
        return datetime.fromtimestamp(seconds, UTC)
    if _DIGITS.fullmatch(text):
        # Not a count of seconds ago: a timestamp in milliseconds, most likely.
        raise InvalidArgument(
            f"{what}: {text} has too many digits for unix seconds (milliseconds?"
            " give seconds, an ISO time or a duration such as 24h)"
        )
    try:
        ago = parse_duration(text)
    except ValueError:
        pass
    else:
        epoch = datetime.fromtimestamp(0, UTC)
        try:
            return max(epoch, now - timedelta(seconds=ago))
        except OverflowError:
            return epoch
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(
            f"{what}: {text!r} is neither a duration (24h) nor an ISO time"
        ) from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    if not 0 <= moment.timestamp() <= _LAST_SECOND.timestamp():
        raise InvalidArgument(f"{what}: before 1970 or after the year 9999")
    return moment.astimezone(UTC)


def type_pattern(value: object) -> str | None:
    """A LIKE pattern (lower case, ``\\`` escapes) for an event type typed as a glob of
    the config's syntax (``*`` and ``?``) or, with neither, as a prefix."""
    text = clean_term(value, "type")
    if text is None:
        return None
    if "[" in text or "]" in text:
        raise InvalidArgument("type: brackets are not supported in a search; use * or ?")
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    if "*" not in text and "?" not in text:
        return escaped + "%"
    return escaped.replace("*", "%").replace("?", "_")


def payload_filter(value: object) -> PayloadMatch | None:
    """``data.object.customer = cus_123``: a dotted path of keys, ``=``, and a value: a
    JSON scalar (``42``, ``true``, ``null``, ``"quoted"``) or else a bare string."""
    text = clean_term(value, "payload filter")
    if text is None:
        return None
    path, sep, raw = text.partition("=")
    keys = path.strip().split(".")
    if not sep or not 1 <= len(keys) <= _MAX_DEPTH or not all(_KEY.fullmatch(k) for k in keys):
        raise InvalidArgument(
            "payload filter: write a dotted path of keys (letters, digits, _ and -), "
            "'=' and a value, e.g. data.object.customer = cus_123"
        )
    raw = raw.strip()
    try:
        parsed: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        parsed = raw
    if isinstance(parsed, dict | list):
        raise InvalidArgument("payload filter: the value must be a string, number, boolean or null")
    if isinstance(parsed, int) and not isinstance(parsed, bool) and abs(parsed) >= 2**63:
        raise InvalidArgument("payload filter: the number is out of range")
    # The bytes a body holds for this value, unless the body may write it escaped.
    needle = raw.strip('"') if isinstance(parsed, str) else raw
    plain = needle.isascii() and not any(c in needle for c in '"\\/')
    return PayloadMatch(
        path=".".join(keys),
        value_json=orjson.dumps(parsed).decode(),
        needle=needle.encode() if plain and isinstance(parsed, str) else b"",
    )


def source_name(config: Config, value: object) -> str | None:
    """A source as typed, matched to the config's name whatever its case; a name the
    config no longer has is kept as typed (its deliveries stay in the journal)."""
    text = clean_term(value, "source")
    if text is None:
        return None
    by_lower = {name.lower(): name for name in config.sources}
    return by_lower.get(text.lower(), text)


def delivery_status(value: object) -> DeliveryStatus | None:
    text = clean_term(value, "status")
    if text is None:
        return None
    if text.lower() not in JOB_STATES:
        raise InvalidArgument(f"status: one of {', '.join(JOB_STATES)}")
    return text.lower()  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class DeliveryQuery:
    """A search as the CLI's options, the admin's query string and the API's parameters
    carry it: text as typed, read by :func:`build_search`."""

    ref: str | None = None
    source: str | None = None
    type: str | None = None
    status: str | None = None
    since: str | None = None
    until: str | None = None
    payload: str | None = None
    before: str | None = None
    limit: int = 50


def build_search(
    config: Config, query: DeliveryQuery, *, now: datetime | None = None
) -> DeliverySearch:
    """The exact store search for what was typed; InvalidArgument for what cannot be one."""
    if not 1 <= query.limit <= MAX_PAGE:
        raise InvalidArgument(f"limit: between 1 and {MAX_PAGE}")
    now = now or datetime.now(UTC)
    since = parse_when(query.since, "since", now=now)
    until = parse_when(query.until, "until", now=now)
    payload = payload_filter(query.payload)
    if payload is not None:
        if since is None:
            since = (until or now) - DEFAULT_PAYLOAD_WINDOW
        if (until or now) - since > MAX_PAYLOAD_WINDOW:
            raise InvalidArgument(
                f"payload filter: the window is at most {MAX_PAYLOAD_WINDOW.days} days "
                "(set since/until closer together)"
            )
    return DeliverySearch(
        ref=delivery_ref(query.ref),
        source=source_name(config, query.source),
        type_pattern=type_pattern(query.type),
        status=delivery_status(query.status),
        since=since,
        until=until,
        payload=payload,
        before=page_cursor(query.before, DELIVERY_CURSOR, "a delivery id (dlv_...)"),
        limit=query.limit,
    )


@dataclass(frozen=True, slots=True)
class SearchPage:
    deliveries: list[DeliveryView]
    #: Matches in all (every page), counted up to :data:`COUNT_CAP`.
    count: int
    #: The ``before`` of the next (older) page, None on the last page.
    next_before: str | None
    search: DeliverySearch

    @property
    def count_capped(self) -> bool:
        return self.count >= COUNT_CAP

    def as_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "count_capped": self.count_capped,
            "next_before": self.next_before,
            "since": self.search.since.isoformat() if self.search.since else None,
            "until": self.search.until.isoformat() if self.search.until else None,
            "deliveries": [
                {k: v for k, v in d.as_json().items() if k != "jobs"} for d in self.deliveries
            ],
        }


async def search_deliveries(
    store: Store, config: Config, query: DeliveryQuery, *, now: datetime | None = None
) -> SearchPage:
    """One page of matching deliveries, newest first, with the count of all matches."""
    search = build_search(config, query, now=now)
    found, count = await store.journal.search_page(
        replace(search, limit=search.limit + 1), cap=COUNT_CAP
    )
    page = found[: search.limit]
    more = len(found) > search.limit
    return SearchPage(page, count, page[-1].id if more else None, search)


async def find_delivery(store: Store, ref: str, source: str | None = None) -> DeliveryView:
    """One delivery by internal id, job id or event id. An event id that several sources
    share is never settled by picking one: AmbiguousId names the sources."""
    clean = delivery_ref(ref)
    if clean is None:
        raise InvalidArgument("no id")
    if clean.startswith("dlv_"):
        found = await store.journal.get_delivery(clean)
        if found is not None and source in (None, found.source):
            return found
    matches = await store.journal.find_deliveries_by_event(clean, source)
    if not matches:
        where = f" in source {source!r}" if source else ""
        raise NotFound(f"no delivery with id or event id {clean!r}{where}")
    if len(matches) > 1:
        sources = tuple(sorted(m.source for m in matches))
        raise AmbiguousId(
            f"event id {clean!r} exists in sources {', '.join(sources)}; name one with source",
            sources=sources,
        )
    return matches[0]
