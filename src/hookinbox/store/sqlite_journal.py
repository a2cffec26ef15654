"""Writing one delivery into the SQLite journal, inside the caller's transaction.

Shared by the batched reservation (``SQLiteStore.reserve_deliveries``) and the inline one
that applies a resource transition in the same commit.
"""

from __future__ import annotations

import json
import sqlite3

from hookinbox.store.base import NewDelivery, Reservation
from hookinbox.store.sqlite_clock import NOW


def reserve_one(conn: sqlite3.Connection, item: NewDelivery) -> Reservation:
    """Inside the caller's transaction: the journal row, payload and jobs of a first
    delivery, or the last-seen/count/conflict update of a repeat."""
    row = conn.execute(
        "INSERT INTO deliveries (id, source, event_id, event_type, body_sha256,"
        " delivery_count, first_seen_at, last_seen_at)"
        f" VALUES (?, ?, ?, ?, ?, ?, {NOW}, {NOW})"
        " ON CONFLICT (source, event_id) DO NOTHING RETURNING id",
        (item.id, item.source, item.event_id, item.event_type, item.body_sha256, item.seen),
    ).fetchone()
    if row is not None:
        conn.execute(
            "INSERT INTO payloads (delivery_id, body, headers) VALUES (?, ?, ?)",
            (item.id, item.body, json.dumps(item.headers)),
        )
        conn.executemany(
            "INSERT INTO jobs (id, delivery_id, source, action, max_attempts,"
            f" next_attempt_at, created_at, updated_at)"
            f" VALUES (?, ?, ?, ?, ?, {NOW}, {NOW}, {NOW})",
            [(job.id, item.id, item.source, job.action, item.max_attempts) for job in item.jobs],
        )
        return Reservation("accepted", item.id)
    first = conn.execute(
        f"UPDATE deliveries SET last_seen_at = {NOW},"
        " delivery_count = delivery_count + :seen,"
        " conflicts = conflicts + :seen * (body_sha256 <> :sha)"
        " WHERE source = :source AND event_id = :event_id RETURNING id, body_sha256",
        {
            "seen": item.seen,
            "sha": item.body_sha256,
            "source": item.source,
            "event_id": item.event_id,
        },
    ).fetchone()
    return Reservation(
        "duplicate",
        first["id"],
        conflict=first["body_sha256"] != item.body_sha256,
        first_body_sha256=first["body_sha256"],
    )
