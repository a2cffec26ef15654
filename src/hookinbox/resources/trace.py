"""The trace layers of tracked resources, so ``hookinbox trace EVENT_ID`` and the admin's
delivery page show them: ``transitions`` (every line of the transition log a delivery
wrote: applied, or rejected with its reason, the source that sent it and the sources its
resource is bound to) and ``outbox`` (the rows those transitions
produced, with their state; never their body, which ``hookinbox outbox show KEY`` gives).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hookinbox.ops.trace import TraceLayer
from hookinbox.store import DeliveryView, Store, iso


async def transitions_layer(store: Store, delivery: DeliveryView) -> list[dict[str, Any]]:
    """The transition log lines written by this delivery, oldest first, each with the
    source that sent it and the sources its resource is bound to: a ``source_mismatch``
    shows who was refused and whose the resource is."""
    rows = []
    bindings: dict[str, tuple[str, ...] | None] = {}
    for t in await store.resources.list_delivery_transitions(delivery.id):
        if t.resource_id not in bindings:
            found = await store.resources.get_resource(t.resource_id)
            bindings[t.resource_id] = found.sources if found is not None else None
        bound = bindings[t.resource_id]
        judged = t.outcome if t.reason is None else f"{t.outcome}: {t.reason}"
        if t.source is not None:
            judged += f"; sent by {t.source}"
        if bound is not None:
            judged += f"; bound to {', '.join(bound) or 'no source yet'}"
        rows.append(
            {
                **t.as_json(),
                "resource_id": t.resource_id,
                "bound_to": list(bound) if bound is not None else None,
                "what": f"{t.resource_id} {t.from_state or '-'} -> {t.to_state or '-'}",
                "detail": judged,
            }
        )
    return rows


async def outbox_layer(store: Store, delivery: DeliveryView) -> list[dict[str, Any]]:
    """The outbox rows this delivery's applied transitions wrote, with their state."""
    keys = dict.fromkeys(
        t.outbox_key
        for t in await store.resources.list_delivery_transitions(delivery.id)
        if t.outbox_key is not None
    )
    rows = []
    for key in keys:
        row = await store.outbox.get_outbox(key)
        if row is None:  # reconciliation reports it (transition_without_outbox)
            continue
        rows.append(
            {
                "key": row.key,
                "kind": row.kind,
                "resource_id": row.resource_id,
                "state": row.state,
                "attempts": row.attempts,
                "last_error": row.last_error,
                "at": iso(row.created_at),
                "sent_at": iso(row.sent_at),
                "failed_at": iso(row.failed_at),
                "what": row.key,
                "detail": row.state if not row.last_error else f"{row.state} ({row.last_error})",
            }
        )
    return rows


#: Handed to the operator functions through :class:`hookinbox.ops.views.OperatorViews`.
TRACE_LAYERS: Mapping[str, TraceLayer] = {"transitions": transitions_layer, "outbox": outbox_layer}
