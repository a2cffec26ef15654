"""Which routes take a delivery: its event type (globs, matched once per type) and then
each route's ``filter`` (:mod:`hookinbox.config.filters`) over the parsed body and the
kept headers; and an ordered route's key for the job it makes (:func:`order_key_of`).

Evaluated once per delivery, in the receiver, before the reservation: the jobs written
with the journal row are those of the routes that passed. A route without a filter costs
nothing more than before. ``hookinbox trace`` evaluates the same conditions on the stored
body and headers to say which route took or skipped an event, and why.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from hookinbox.config import ORDER_HEADER, Config, Route, Source
from hookinbox.config.filters import Condition
from hookinbox.errors import ConfigError
from hookinbox.payload import MISSING, resolve_pointer, string_at


def json_equal(left: Any, right: Any) -> bool:
    """Equality as JSON means it: ``true`` is not ``1``, ``1`` is ``1.0``, containers
    compared member by member."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, list) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(map(json_equal, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    return type(left) is type(right) and left == right


def holds(condition: Condition, payload: Mapping[str, Any], headers: Mapping[str, str]) -> bool:
    if condition.pointer is not None:
        value = resolve_pointer(payload, condition.pointer)
    else:
        assert condition.header is not None
        value = headers.get(condition.header, MISSING)
    if condition.exists is not None:
        return (value is not MISSING) == condition.exists
    if value is MISSING:
        return False
    if condition.glob is not None:
        return isinstance(value, str) and fnmatch.fnmatchcase(value, condition.glob)
    if condition.in_ is not None:
        return any(json_equal(value, candidate) for candidate in condition.in_)
    return json_equal(value, condition.equals)


def first_failing(
    route: Route, payload: Mapping[str, Any], headers: Mapping[str, str]
) -> int | None:
    """The index of the route's first condition that does not hold, or None."""
    for index, condition in enumerate(route.filter):
        if not holds(condition, payload, headers):
            return index
    return None


def filtered(
    routes: Sequence[Route], payload: Mapping[str, Any], headers: Mapping[str, str]
) -> list[Route]:
    """The routes whose filter holds (routes without one always do)."""
    return [r for r in routes if not r.filter or first_failing(r, payload, headers) is None]


def check_filters(config: Config, kept_header: Any) -> None:
    """At start-up: a header condition may read only a header kept with a delivery
    (``kept_header(name)``), so that trace can evaluate it again later."""
    for name, source in config.sources.items():
        for index, route in enumerate(source.routes):
            for number, condition in enumerate(route.filter):
                if condition.header is not None and not kept_header(condition.header):
                    raise ConfigError(
                        f"sources.{name}.routes.{index}.filter.{number}.header: "
                        f"{condition.header!r} is not kept with a delivery (the content type "
                        "and provider headers are: docs/edge.md)"
                    )


def explain(
    source: Source,
    event_type: str,
    payload: Mapping[str, Any] | None,
    headers: Mapping[str, str],
    job_actions: frozenset[str],
) -> list[dict[str, Any]]:
    """For trace: each route of the source, whether its events matched, what its filter
    said (on the stored body and headers; ``payload`` None once purged), and whether the
    delivery has its job. Evaluated with today's config, which may differ from the one
    the delivery was reserved under: a job present and a filter failing says so."""
    rows = []
    for route in source.routes:
        matched = route.matches(event_type)
        if not route.filter:
            verdict = "no filter"
        elif not matched:
            verdict = "not evaluated: events do not match"
        elif payload is None:
            verdict = "not evaluated: payload purged"
        else:
            failing = first_failing(route, payload, headers)
            verdict = "passed" if failing is None else f"failed: {route.filter[failing].describe()}"
        rows.append(
            {
                "action": route.action,
                "events_match": matched,
                "filter": verdict,
                "job": route.action in job_actions,
            }
        )
    return rows


def order_key_of(
    source: str, route: Route, payload: Mapping[str, Any], headers: Mapping[str, str]
) -> str | None:
    """The key an ordered route's job is held by: a hash of the source, the action and
    the value its ``order_key`` reads (lower-case ``headers``), so two routes' keys never
    meet, the column stays 64 characters whatever the value, and the customer id or
    whatever the key names is not stored in the clear. None: the route is not ordered,
    or the delivery has no such value (the job runs unordered)."""
    spec = route.order_key
    if spec is None:
        return None
    if spec.startswith(ORDER_HEADER):
        value = headers.get(spec[len(ORDER_HEADER) :]) or None
    else:
        value = string_at(payload, spec)
    if value is None:
        return None
    return hashlib.sha256(f"{source}\x1f{route.action}\x1f{value}".encode()).hexdigest()
