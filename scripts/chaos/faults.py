"""The fault schedule, and how long hookinbox took to come back after each fault.

A fault runs at its offset from the start of the load, or later if the one before is
still being measured; one that would start in the last seconds of the load is skipped (and
reported). After a fault, a probe sends one new signed delivery (retried every ~0.15 s
with the same id, like a provider) and measures

- answered: fault over -> the probe's first 2xx (the receiver takes deliveries again);
- forwarded: fault over -> the sink has the probe (received, queued, claimed, forwarded);
- outage: fault started -> the probe's first 2xx.

"Fault over" is when the restart or start command returned, or the SIGKILL was sent.
Probe ids are checked like every other acknowledged id.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass

import httpx

from .cluster import Cluster
from .load import PROBE_BACKOFF, Events, Tally, deliver
from .plan import FaultKind, Plan
from .processes import Supervised
from .signing import Signer

#: A fault is not started in the last seconds of the load: its effects need load to show.
END_MARGIN = 2.0
GAP_AFTER_RECOVERY = 1.0


@dataclass
class FaultOutcome:
    kind: FaultKind
    at: float  # seconds after the load started
    took: float  # how long the fault itself lasted (restart, stop + start, kill)
    answered: float | None = None
    forwarded: float | None = None
    outage: float | None = None
    note: str = ""


@dataclass
class Targets:
    cluster: Cluster | None
    serve: Supervised
    worker: Supervised | None  # None with --no-worker: serve's own workers only
    webhook_url: str
    sink_url: str


async def inject(kind: FaultKind, targets: Targets, plan: Plan) -> str:
    """Run one fault; returns a note (the PIDs killed, or what could not be done)."""
    cluster = targets.cluster
    if kind.touches_postgres and cluster is None:
        return "skipped: no PostgreSQL"
    if kind is FaultKind.PG_RESTART_FAST and cluster is not None:
        await cluster.restart("fast")
    elif kind is FaultKind.PG_RESTART_IMMEDIATE and cluster is not None:
        await cluster.restart("immediate")
    elif kind is FaultKind.PG_STOP_START and cluster is not None:
        await cluster.stop("fast")
        await asyncio.sleep(plan.stop_seconds)
        await cluster.start()
        return f"down {plan.stop_seconds:.0f} s"
    elif kind is FaultKind.KILL_SERVE:
        return _killed([targets.serve])
    elif kind is FaultKind.KILL_WORKER:
        return _killed([targets.worker]) if targets.worker else "skipped: no worker process"
    elif kind is FaultKind.KILL_BOTH:
        return _killed([targets.serve, *([targets.worker] if targets.worker else [])])
    return ""


def _killed(victims: list[Supervised]) -> str:
    parts = []
    for victim in victims:
        pid = victim.kill()
        parts.append(f"{victim.name} pid {pid}" if pid else f"{victim.name} was not running")
    return "SIGKILL " + ", ".join(parts)


async def probe(
    targets: Targets,
    signer: Signer,
    events: Events,
    tally: Tally,
    number: int,
    since: float,
    bound: float,
    deadline: float,
) -> tuple[float | None, float | None]:
    """Seconds from ``since`` to the probe's first 2xx and to its arrival at the sink
    (waiting at most ``bound`` for each, and never past ``deadline``)."""
    event_id, body = events.new("probe", number)
    rng = random.Random(number)
    async with httpx.AsyncClient(timeout=1.0, trust_env=False) as http:
        acknowledged = await deliver(
            http,
            targets.webhook_url,
            signer,
            event_id,
            body,
            tally,
            tally.probe_answers,
            PROBE_BACKOFF,
            rng,
            give_up_at=min(since + bound, deadline),
            max_attempts=10_000,
        )
        if not acknowledged:
            return None, None
        answered = time.monotonic() - since
        answered_at = time.monotonic()
        while time.monotonic() < min(answered_at + bound, deadline):
            try:
                seen = await http.get(f"{targets.sink_url}/seen/{event_id}")
                if seen.status_code == 200:
                    return answered, time.monotonic() - since
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    return answered, None


async def run_faults(
    plan: Plan,
    targets: Targets,
    signer: Signer,
    events: Events,
    tally: Tally,
    load_start: float,
    load_end: float,
    deadline: float,
) -> list[FaultOutcome]:
    outcomes: list[FaultOutcome] = []
    for number, scheduled in enumerate(plan.schedule, start=1):
        await _sleep_until(load_start + scheduled.at)
        started = time.monotonic()
        at = started - load_start
        if started > load_end - END_MARGIN:
            outcomes.append(FaultOutcome(scheduled.kind, at, 0.0, note="skipped: load over"))
            continue
        try:
            note = await inject(scheduled.kind, targets, plan)
        except Exception as exc:  # a failed pg_ctlcluster is a finding, not a crash
            note = f"fault failed: {exc}"
        over = time.monotonic()
        outcome = FaultOutcome(scheduled.kind, at, over - started, note=note)
        answered, forwarded = await probe(
            targets, signer, events, tally, number, over, plan.recovery_bound, deadline
        )
        outcome.answered, outcome.forwarded = answered, forwarded
        outcome.outage = None if answered is None else answered + outcome.took
        outcomes.append(outcome)
        await asyncio.sleep(GAP_AFTER_RECOVERY)
    return outcomes


async def _sleep_until(deadline: float) -> None:
    await asyncio.sleep(max(0.0, deadline - time.monotonic()))
