"""How an erasure reaches a subject's jobs, on both stores.

A delivery's jobs are a range of ``jobs_pkey`` whose bounds come from the delivery's
row. Joined to the subject's deliveries by delivery id, PostgreSQL hashed every job
instead (1.3 s a batch of 500 at 5 million jobs, against 19 ms probed: docs/store.md,
``{join_jobs_of}``). They reach the store's driver on purpose: plans are below the
store's contract.
"""

from __future__ import annotations

from typing import Any

from hookinbox.store import Store
from hookinbox.store.erasure import _COUNT_SNIPPETS, _DROP_SNIPPETS
from tests.support.plans import chosen_plan, scans_whole

_PARAMS: dict[str, Any] = {
    "subject": "subject-hash",
    "source": None,
    "ids": [f"dlv_0190{n:08x}" for n in range(500)],
}


async def test_counting_a_subjects_snippets_probes_each_deliverys_jobs(store: Store) -> None:
    plan = await chosen_plan(store, _COUNT_SNIPPETS, _PARAMS)
    assert not scans_whole(plan, "jobs", "j"), plan


async def test_an_erasure_batch_drops_snippets_through_each_deliverys_jobs(store: Store) -> None:
    plan = await chosen_plan(store, _DROP_SNIPPETS, _PARAMS)
    assert not scans_whole(plan, "jobs", "j"), plan
