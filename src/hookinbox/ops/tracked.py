"""Tracked resources as operators read them: a keyset page, one resource, its log.

The CLI's ``resources list|show`` and the API's ``/resources`` call these, so both show
the same rows. The transition log holds every judgement: applied, rejected (with the
reason, never the payload), created and attached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hookinbox.errors import NotFound
from hookinbox.store import ResourceView, Store, TransitionView


@dataclass(frozen=True, slots=True)
class TrackedResourceList:
    resources: list[ResourceView]
    #: The id to pass as ``before`` for the next page, None on the last one.
    next_before: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "resources": [r.as_json() for r in self.resources],
            "next_before": self.next_before,
        }


@dataclass(frozen=True, slots=True)
class TrackedResource:
    resource: ResourceView
    transitions: list[TransitionView]

    def as_json(self) -> dict[str, Any]:
        return {**self.resource.as_json(), "transitions": [t.as_json() for t in self.transitions]}


async def list_resources(
    store: Store,
    *,
    kind: str | None = None,
    tenant: str | None = None,
    state: str | None = None,
    before: str | None = None,
    limit: int = 50,
) -> TrackedResourceList:
    """Newest resources first, ``limit`` a page (``before``: the last id seen)."""
    found = await store.resources.list_resources(
        kind=kind, tenant=tenant, state=state, before=before, limit=limit + 1
    )
    page = found[:limit]
    return TrackedResourceList(page, page[-1].id if len(found) > limit else None)


async def resource_transitions(store: Store, resource_id: str) -> list[TransitionView]:
    """A resource's transition log, oldest first; NotFound for an unknown resource."""
    if await store.resources.get_resource(resource_id) is None:
        raise NotFound(f"no resource {resource_id!r}")
    return await store.resources.list_transitions(resource_id)


async def show_resource(store: Store, resource_id: str) -> TrackedResource:
    """One resource and its transition log; NotFound for an unknown resource."""
    view = await store.resources.get_resource(resource_id)
    if view is None:
        raise NotFound(f"no resource {resource_id!r}")
    return TrackedResource(view, await store.resources.list_transitions(resource_id))
