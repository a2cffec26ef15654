"""Put deliveries and jobs into a store directly, in a chosen state, for operator tests.

Goes through the store's own receiving and working methods (reserve, claim, complete,
fail), so the rows look exactly as the pipeline would leave them.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

from hookinbox.ids import delivery_id_floor, job_id, new_delivery_id
from hookinbox.store import NewDelivery, NewJob, Store


async def add_delivery(
    store: Store,
    event_id: str,
    *,
    actions: tuple[str, ...] = ("count",),
    source: str = "test",
    event_type: str = "crm.lead.created",
    max_attempts: int = 3,
    data: object = None,
    body: bytes | None = None,
    delivery_id: str | None = None,
) -> str:
    """A reserved delivery with one accepted job per action; returns the delivery id.
    ``data`` is the JSON body's ``data`` member; ``body`` replaces the whole body;
    ``delivery_id`` one made at another time (``tests.support.journal.id_at``)."""
    delivery_id = delivery_id or new_delivery_id()
    if body is None:
        body = json.dumps({"id": event_id, "type": event_type, "data": data or {}}).encode()
    (answer,) = await store.journal.reserve_deliveries(
        [
            NewDelivery(
                id=delivery_id,
                source=source,
                event_id=event_id,
                event_type=event_type,
                body_sha256=hashlib.sha256(body).hexdigest(),
                body=body,
                headers={"content-type": "application/json"},
                jobs=tuple(NewJob(job_id(delivery_id, a), a) for a in actions),
                max_attempts=max_attempts,
            )
        ]
    )
    assert answer.outcome == "accepted"
    return delivery_id


def id_at(when: datetime, n: int = 0) -> str:
    """A delivery id as one made at ``when`` would be (the ``n``-th of its millisecond)."""
    return f"{delivery_id_floor(when.timestamp())}{n:020x}"


async def settle_all(store: Store, state: str, *, error: str = "crm_unavailable") -> list[str]:
    """Claim every due job and complete or dead-letter it; returns the job ids."""
    done = []
    for job in await store.queue.claim_due_jobs("test-worker", 1000, 30):
        if state == "completed":
            assert await store.queue.complete_job(job.id, job.lease_token, f"biz-{job.id}")
        else:
            assert await store.queue.fail_job(job.id, job.lease_token, error)
        done.append(job.id)
    return done


def keyed_delivery(
    event_id: str,
    key: str | None,
    *,
    delivery_id: str | None = None,
    body: bytes = b"{}",
    source: str = "s",
) -> NewDelivery:
    """A delivery of one job (action ``a``) of an ordered route's ``key`` (hashed as the
    receiver stores it), or of no key (``None``: unordered), not yet reserved."""
    delivery_id = delivery_id or new_delivery_id()
    order_key = hashlib.sha256(key.encode()).hexdigest() if key is not None else None
    return NewDelivery(
        id=delivery_id,
        source=source,
        event_id=event_id,
        event_type="t",
        body_sha256=hashlib.sha256(body).hexdigest(),
        body=body,
        headers={},
        jobs=(NewJob(job_id(delivery_id, "a"), "a", 3, order_key, False),),
        max_attempts=3,
    )


async def every_first_job_completed(store: Store, items: list[NewDelivery]) -> bool:
    """Whether each delivery's first job is completed (a wait_for condition)."""
    for item in items:
        job = await store.queue.get_job(item.jobs[0].id)
        if job is None or job.state != "completed":
            return False
    return True
