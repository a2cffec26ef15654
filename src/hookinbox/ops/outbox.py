"""Sending one notification again: the operator's resend of an outbox row.

Same key, same body, re-read from the existing row; the resource is not touched. Audited
like a replay or a dead-letter retry, under the delivery whose transition wrote the row.
"""

from __future__ import annotations

from hookinbox.errors import NotFound
from hookinbox.store import OutboxState, OutboxView, Store


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


async def list_outbox(
    store: Store, *, state: OutboxState | None = None, kind: str | None = None, limit: int = 50
) -> list[OutboxView]:
    """Newest outbox rows first (``state="failed"``: the dead letters)."""
    return await store.outbox.list_outbox(state=state, kind=kind, limit=limit)


async def show_outbox(store: Store, key: str) -> OutboxView:
    """One outbox row with its body; NotFound when no row has that key."""
    row = await store.outbox.get_outbox(key)
    if row is None:
        raise NotFound(f"no outbox row {key!r}")
    return row
