"""The encryption key ring, as an operator sees it: how many sealed values each key holds,
and the rotation that re-wraps every value to the ring's first key.

A rotation walks each table a page at a time (a keyset page over its primary key), each
page read on its own and written in one short transaction, so receiving and the workers
never wait for it; a value changed or purged between the read and the write is left
alone (the next rotation sees it). Only the data key's wrap changes: the sealed body is
not rewritten. docs/operations/encryption.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hookinbox.errors import ConfigError, InvalidArgument
from hookinbox.logs import get_logger
from hookinbox.store import SEALED_TABLES, KeyCount, RewrapBatch, Store

log = get_logger("hookinbox.ops")

#: The largest page a rotation takes.
MAX_ROTATE_BATCH = 10_000


@dataclass(slots=True)
class TableRotation:
    """One table's rotation: sealed values seen, re-wrapped (or to re-wrap, on a dry run),
    and left because they changed meanwhile."""

    table: str
    seen: int = 0
    rewrapped: int = 0
    changed: int = 0
    batches: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "seen": self.seen,
            "rewrapped": self.rewrapped,
            "changed": self.changed,
            "batches": self.batches,
        }


@dataclass(frozen=True, slots=True)
class KeyRotation:
    key_id: str
    dry_run: bool
    tables: list[TableRotation] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "key_id": self.key_id,
            "dry_run": self.dry_run,
            "tables": [t.as_json() for t in self.tables],
        }


async def rotate_keys(
    store: Store,
    *,
    actor: str,
    batch: int = 500,
    dry_run: bool = False,
    progress: Callable[[RewrapBatch], None] | None = None,
) -> KeyRotation:
    """Re-wrap every sealed value not under the ring's first key to it, ``batch`` rows
    per transaction. KeyUnavailable when a value's key is not in the ring (put it back,
    after the new one, until the rotation is done)."""
    if not 1 <= batch <= MAX_ROTATE_BATCH:
        raise InvalidArgument(f"--batch: between 1 and {MAX_ROTATE_BATCH}")
    current = store.sealer.current_key_id
    if current is None:
        raise ConfigError("encryption: the key ring is empty; put the new key first in it")
    rotation = KeyRotation(current, dry_run)
    for table in SEALED_TABLES:
        done = TableRotation(table)
        after: Any = None
        while True:
            page = await store.sealed_rows.rewrap_page(
                table, after=after, limit=batch, dry_run=dry_run
            )
            done.batches += 1
            done.seen += page.seen
            done.rewrapped += page.rewrapped
            done.changed += page.changed
            if progress is not None:
                progress(page)
            if page.seen < batch:
                break
            after = page.after
        rotation.tables.append(done)
    if not dry_run:
        rewrapped = sum(t.rewrapped for t in rotation.tables)
        log.info("keys_rotated", key_id=current, rewrapped=rewrapped, actor=actor)
        await store.audit.record_operator_action(
            actor=actor, command="keys-rotate", detail=f"to {current}: {rewrapped} re-wrapped"
        )
    return rotation


async def key_counts(store: Store) -> list[KeyCount]:
    """Sealed values per table and key id (a walk of every sealed value; no key needed)."""
    return await store.sealed_rows.count_by_key()
