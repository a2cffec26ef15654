"""``hookinbox rejected retry``: a kept rejected delivery through the normal path again.

The source's verifier with the current secrets, checked at the time the delivery was
received (so a timestamp that was fresh then is fresh now, and an old capture gains
nothing), then the edge, the journal and the routes, as if it had just arrived. A
delivery that still fails stays rejected, with its new code; every retry is audited.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hookinbox.errors import HookinboxError, NotFound
from hookinbox.logs import get_logger
from hookinbox.receive.receiver import Receiver
from hookinbox.store import RejectedDelivery, Store

log = get_logger("hookinbox.rejected")


@dataclass(frozen=True, slots=True)
class RetryResult:
    rejected_id: str
    source: str
    #: ``accepted`` / ``duplicate``, or the code it is still refused with.
    outcome: str
    delivery_id: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "rejected_id": self.rejected_id,
            "source": self.source,
            "outcome": self.outcome,
            "delivery_id": self.delivery_id,
        }


async def retry_rejected(
    receiver: Receiver, store: Store, found: RejectedDelivery, *, actor: str
) -> RetryResult:
    """Verify a kept delivery again with the current secrets, at the time it was received,
    and reserve it through the normal path; record the outcome and audit it."""
    if found.body is None:
        outcome, delivery_id = "body_not_kept", None
    else:
        try:
            receipt = await receiver.receive(
                found.source,
                found.body,
                found.headers,
                now=found.last_seen_at.timestamp(),
                keep_rejected=False,
            )
        except HookinboxError as exc:
            outcome, delivery_id = exc.code, None
        else:
            outcome, delivery_id = receipt.status, receipt.delivery_id
    await store.rejected.mark_rejected_retried(found.id, outcome, delivery_id)
    await store.audit.record_operator_action(
        actor=actor,
        command="rejected-retry",
        source=found.source,
        delivery_id=delivery_id,
        detail=f"{found.id}:{outcome}",
    )
    log.info(
        "rejected_retried",
        rejected_id=found.id,
        source=found.source,
        outcome=outcome,
        delivery_id=delivery_id,
        actor=actor,
    )
    return RetryResult(found.id, found.source, outcome, delivery_id)


async def retry_rejected_many(
    receiver: Receiver,
    store: Store,
    *,
    ids: list[str] | None = None,
    source: str | None = None,
    limit: int = 100,
    actor: str,
) -> list[RetryResult]:
    """Retry the given rejected deliveries, or up to ``limit`` not yet accepted ones
    (oldest first) of ``source`` (every source when None). NotFound for an unknown id."""
    chosen: list[RejectedDelivery] = []
    if ids:
        for rejected_id in ids:
            found = await store.rejected.get_rejected(rejected_id)
            if found is None:
                raise NotFound(f"no rejected delivery {rejected_id!r}")
            chosen.append(found)
    else:
        for item in await store.rejected.oldest_unsettled_rejected(source=source, limit=limit):
            found = await store.rejected.get_rejected(item.id)
            if found is not None:
                chosen.append(found)
    return [await retry_rejected(receiver, store, found, actor=actor) for found in chosen]
