"""How a purge counts the journal rows it will delete and hold, on both stores.

The count runs once, unpaced, before the first batch. Probing each old row's jobs for
one that is unfinished cost a probe per row (at 20 million rows, the day a purge
retires holds 831,000: seconds of a core while the receivers wait for it; 19 s for
1.6 million rows against 0.6 s). The held rows are found from the jobs' side instead,
in one pass over the jobs below the ceiling. Plans are below the store's contract, so
the test reaches the driver.
"""

from __future__ import annotations

from typing import Any

from hookinbox.store import Store
from hookinbox.store.retention import _COUNT_DELIVERIES
from tests.support.plans import chosen_plan

_PARAMS: dict[str, Any] = {"age": 3600.0, "ceiling": "dlv_0190", "jobs_ceiling": "dlv_0191"}


async def test_counting_a_purge_reads_the_old_jobs_once_not_each_rows_jobs(
    store: Store,
) -> None:
    plan = await chosen_plan(store, _COUNT_DELIVERIES, _PARAMS)
    assert not any("SubPlan" in line or "CORRELATED" in line for line in plan), plan
