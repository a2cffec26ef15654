"""The leases a worker holds, renewed together while their jobs run.

A job is held from its claim until its settlement commits. A worker that dies stops
renewing, its leases expire, and any worker takes the jobs again; a lease this worker
lost (another worker took the job over) is no longer renewed, and its settlement will
find the lease gone.
"""

from __future__ import annotations

import asyncio

from hookinbox.store import ClaimedJob, Store


class LeaseKeeper:
    """Every lease one worker holds (job id -> lease token), renewed in one statement a
    few times per lease."""

    def __init__(self, store: Store, lease_seconds: float) -> None:
        self._store = store
        self._lease_seconds = lease_seconds
        self._held: dict[str, str] = {}

    def hold(self, job: ClaimedJob) -> None:
        self._held[job.id] = job.lease_token

    def release(self, job: ClaimedJob) -> None:
        self._held.pop(job.id, None)

    async def run(self) -> None:
        """Renew until cancelled."""
        interval = max(0.5, self._lease_seconds / 3)
        while True:
            await asyncio.sleep(interval)
            held = dict(self._held)
            if not held:
                continue
            try:
                kept = await self._store.queue.renew_leases(held, self._lease_seconds)
            except Exception:  # the store is away for a moment: the next renewal may do
                continue
            for job_id in held.keys() - kept:
                # Lost (another worker took it over): stop renewing it.
                if self._held.get(job_id) == held[job_id]:
                    del self._held[job_id]
