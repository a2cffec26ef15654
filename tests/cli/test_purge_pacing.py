"""A large purge on SQLite must not starve the receivers of the same file.

SQLite has one writer. ``hookinbox purge`` in its own process, batch after batch back to
back, kept taking the write lock from a receiver waiting on it (its busy handler sleeps up
to 100 ms between tries): in the bench's growth mode a purge of 1 million payloads held a
receiver at a fifth of its rate for the purge's 15 s. The purge now sizes its batches to
hold the lock ~20 ms and pauses after each so that it holds the lock at most
``[operations] purge_write_share`` of its wall time. SQLite only: PostgreSQL's writers do
not take turns on one lock (its purge cost is measured by the bench, not here).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import statistics
import sys
import time
from pathlib import Path

from hookinbox.ids import job_id, new_delivery_id
from hookinbox.store import NewDelivery, NewJob, open_store_for
from tests.support.configs import write_config
from tests.support.processes import REPO, hookinbox_env

OLD_PAYLOADS = 60_000
#: The most rows per batch; the purge picks fewer (a batch aims at ~20 ms of the lock).
BATCH = 2_000
#: Old, completed deliveries with their payloads, written straight into the migrated file:
#: two days old, so every payload is past a one-day retention.
_FILL = """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count)
INSERT INTO {table} {columns} SELECT {values} FROM n
"""
_TABLES = {
    "deliveries": (
        "(id, source, event_id, event_type, body_sha256, delivery_count, first_seen_at,"
        " last_seen_at)",
        "printf('dlv_old_%08d', i), 'test', printf('evt_old_%08d', i), 'old.event',"
        " 'sha', 1, :then, :then",
    ),
    "jobs": (
        "(id, delivery_id, source, action, state, attempts, max_attempts, next_attempt_at,"
        " created_at, updated_at, completed_at)",
        "printf('dlv_old_%08d:count', i), printf('dlv_old_%08d', i), 'test', 'count',"
        " 'completed', 1, 3, :then, :then, :then, :then",
    ),
    "payloads": (
        "(delivery_id, body, headers)",
        "printf('dlv_old_%08d', i), zeroblob(300), '{}'",
    ),
}


def fill_old_payloads(path: Path, count: int) -> None:
    then = time.time() - 2 * 86400
    with sqlite3.connect(path) as conn:
        for table, (columns, values) in _TABLES.items():
            sql = _FILL.format(table=table, columns=columns, values=values)
            conn.execute(sql, {"count": count, "then": then})


def hookinbox_binary() -> str:
    """The ``hookinbox`` console script installed beside this interpreter."""
    return str(Path(sys.executable).with_name("hookinbox"))


async def test_a_purge_of_many_batches_lets_a_receiver_of_the_same_file_commit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "inbox.db"
    url = f"sqlite:///{path}"
    store = open_store_for(url)
    await store.open()
    await asyncio.to_thread(fill_old_payloads, path, OLD_PAYLOADS)
    config = write_config(tmp_path / "hookinbox.toml", url, routes=[])
    purge = await asyncio.create_subprocess_exec(
        *(hookinbox_binary(), "purge", "--payloads-only", "--older-than", "1d"),
        *("--batch", str(BATCH), "--config", str(config)),
        env=hookinbox_env(),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    finished = asyncio.ensure_future(purge.communicate())
    waits: list[float] = []
    try:
        # The receiver's side: a writer that keeps inserting, one reservation at a time,
        # while the purge runs (bounded: the purge is given two minutes).
        deadline = time.monotonic() + 120
        while not finished.done() and time.monotonic() < deadline:
            delivery_id = new_delivery_id()
            item = NewDelivery(
                id=delivery_id,
                source="test",
                event_id=f"evt_new_{len(waits)}",
                event_type="new.event",
                body_sha256="sha",
                body=b"{}",
                headers={},
                jobs=(NewJob(job_id(delivery_id, "count"), "count", None),),
                max_attempts=3,
            )
            started = time.monotonic()
            (answer,) = await store.journal.reserve_deliveries([item])
            waits.append(time.monotonic() - started)
            assert getattr(answer, "outcome", None) == "accepted", answer
            await asyncio.sleep(0.02)
        out, err = (part.decode() for part in await asyncio.wait_for(finished, 60))
        kept = (await store.count_rows())["payloads"]
    finally:
        if purge.returncode is None:
            purge.kill()
            await finished
        await store.close()
    assert purge.returncode == 0, err
    # The purge finished and says what it did: every old payload, in many batches; the
    # new deliveries' payloads stayed.
    found = re.search(r"payloads: deleted (\d+) older than 86400s in (\d+) batch", out)
    assert found is not None, out
    deleted, batches = int(found.group(1)), int(found.group(2))
    assert deleted == OLD_PAYLOADS and kept == len(waits)
    assert batches >= OLD_PAYLOADS // BATCH, out
    # The writer got in between the batches all along: every pause (at least 0.1 s,
    # longer than the writer's 20 ms between two reservations) let at least one in. And
    # no reservation waited out a stretch of the purge: the longest wait is one batch's
    # hold and the busy handler's next try, under half a second unless the machine makes
    # every commit slow (then ten times the typical wait). Before the pacing, a
    # reservation waited up to 1.06 s and ~25 went in per 100 batches.
    assert len(waits) >= batches, (len(waits), batches)
    typical = statistics.median(waits)
    assert max(waits) < max(0.5, 10 * typical), (typical, sorted(waits)[-5:])
