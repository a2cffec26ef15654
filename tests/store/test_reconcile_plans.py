"""How reconcile finds the deliveries without jobs, on both stores.

A whole-store check: one anti-join of the journal against every job. It reads the
journal's ids alone (an index that holds them, not the table's rows), and reads whole
only the rows it finds, by key, for their source and type: the rows are the wide part
of the journal, and the check used to read them all (once to count, once to sample).
Plans are below the store's contract, so the test reaches the driver.
"""

from __future__ import annotations

from hookinbox.store import Store
from hookinbox.store.reads import ANOMALY_CHECKS
from tests.support.plans import query_plan, scans_whole


async def test_finding_deliveries_without_jobs_reads_the_journals_ids_not_its_rows(
    store: Store,
) -> None:
    count, sample = ANOMALY_CHECKS["deliveries_without_jobs"]
    assert count is None  # the groups' sum is the count: one pass, not two
    plan = await query_plan(store, sample, {"limit": 10_000})
    # The anti-join's side of the journal (alias m): its primary key only.
    assert any(
        "Index Only Scan using deliveries_pkey on deliveries m" in line  # PostgreSQL
        or " m USING COVERING INDEX sqlite_autoindex_deliveries" in line  # SQLite
        for line in plan
    ), plan
    # The rows it found (alias d) by key, never the whole table.
    assert not scans_whole(plan, "deliveries", "d"), plan
