"""A large purge on SQLite must not starve the receivers of the same file.

SQLite has one writer. ``hookinbox purge`` in its own process, batch after batch back to
back, kept taking the write lock from a receiver waiting on it (its busy handler sleeps up
to 100 ms between tries): in the bench's growth mode a purge of 1 million payloads held a
receiver at a fifth of its rate for the purge's 15 s. The purge now pauses after each
batch (``[operations] purge_pause``). SQLite only: PostgreSQL's writers do not take turns
on one lock (its purge cost is measured by the bench, not here).
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
from pathlib import Path

from hookinbox.ids import job_id, new_delivery_id
from hookinbox.store import NewDelivery, NewJob, open_store_for
from tests.support.configs import write_config
from tests.support.processes import REPO, hookinbox_env

OLD_PAYLOADS = 200_000
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
        *(sys.executable, "-m", "hookinbox.cli", "purge", "--payloads-only", "--older-than"),
        *("1d", "--batch", str(BATCH), "--config", str(config)),
        env=hookinbox_env(),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    finished = asyncio.ensure_future(purge.communicate())
    waits: list[float] = []
    try:
        # The receiver's side: one reservation at a time while the purge runs.
        began = time.monotonic()
        deadline = began + 120
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
        purge_seconds = time.monotonic() - began
    finally:
        if purge.returncode is None:
            purge.kill()
            await finished
        await store.close()
    assert purge.returncode == 0, err
    assert f"payloads: deleted {OLD_PAYLOADS}" in out
    # Reservations went in between the batches all along, none waited out a long stretch
    # of the purge (the busy timeout is 5 s; before the pause, one waited for the rest of
    # it). A batch takes longer on a loaded machine, and so does the purge it is a
    # hundredth of: the bound is half a second or a tenth of this purge, whichever is more.
    assert len(waits) >= 10, waits
    assert max(waits) < max(0.5, purge_seconds / 10), (purge_seconds, sorted(waits)[-5:])
