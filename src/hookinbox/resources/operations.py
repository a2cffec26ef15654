"""What tracked resources add to the operator functions of :mod:`hookinbox.ops`.

Two trace layers, so ``hookinbox trace EVENT_ID`` and the admin delivery page show them:
``transitions`` (every line of the transition log a delivery wrote: applied, or rejected
with its reason) and ``outbox`` (the rows those transitions produced, with their state;
never their body, which ``hookinbox outbox show KEY`` gives). And the four resource
checks of reconciliation (:mod:`hookinbox.resources.checks`). And :func:`resend_outbox`,
the operator's resend of one notification, audited like a replay or a dead-letter retry.

:func:`install` registers them; :mod:`hookinbox.app` calls it when imported, which every
library path does (``import hookinbox`` imports the app), so a mounted
:class:`~hookinbox.Inbox`, the admin page and the CLI all see the same layers and checks.
"""

from __future__ import annotations

from typing import Any

from hookinbox.ops.reconcile import register_check
from hookinbox.ops.trace import register_trace_layer
from hookinbox.resources.checks import CHECKS
from hookinbox.store import DeliveryView, OutboxView, Store, iso


async def transitions_layer(store: Store, delivery: DeliveryView) -> list[dict[str, Any]]:
    """The transition log lines written by this delivery, oldest first."""
    rows = []
    for t in await store.resources.list_delivery_transitions(delivery.id):
        judged = t.outcome if t.reason is None else f"{t.outcome}: {t.reason}"
        rows.append(
            {
                **t.as_json(),
                "resource_id": t.resource_id,
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


async def resend_outbox(
    store: Store, key: str, *, actor: str, command: str, only_failed: bool = False
) -> OutboxView:
    """Send one notification again from its existing row (same key, same body; the
    resource is not touched), and record who did it in the operators' audit, under the
    delivery whose transition wrote the row, so that delivery's trace shows it.
    ``only_failed``: refuse a row that is not a dead letter (``outbox retry``)."""
    row = await store.outbox.requeue_outbox(key, only_failed=only_failed)
    delivery_id = None
    if row.resource_id is not None:
        delivery_id = next(
            (
                t.delivery_id
                for t in await store.resources.list_transitions(row.resource_id)
                if t.outbox_key == key and t.outcome == "applied"
            ),
            None,
        )
    await store.audit.record_operator_action(
        actor=actor, command=command, delivery_id=delivery_id, detail=f"outbox {key}"
    )
    return row


def install() -> None:
    """Register the trace layers and the reconcile checks (again: a no-op)."""
    register_trace_layer("transitions", transitions_layer)
    register_trace_layer("outbox", outbox_layer)
    for check in CHECKS:
        register_check(check)
