"""What one run does: the store, the load, the fault schedule and every bound.

Two sizes: the default (about 2 minutes of wall time in all, 90 s of load) and
``--quick`` (under a minute, 36 s of load). Every wait has a bound, and the whole run has
one more (``max_total_seconds``) above them.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, replace
from enum import StrEnum


class FaultKind(StrEnum):
    PG_RESTART_FAST = "pg-restart-fast"
    PG_RESTART_IMMEDIATE = "pg-restart-immediate"
    PG_STOP_START = "pg-stop-start"
    KILL_SERVE = "kill-serve"
    KILL_WORKER = "kill-worker"
    KILL_BOTH = "kill-both"

    @property
    def touches_postgres(self) -> bool:
        return self.value.startswith("pg-")


@dataclass(frozen=True)
class ScheduledFault:
    at: float  # seconds after the load started
    kind: FaultKind


# Offsets leave room for each fault's recovery (a probe waits for its forward) before the
# next; a fault that would start in the last 2 s of the load is skipped and reported. The
# SIGKILLs come first: a process killed soon after a PostgreSQL fault would hide whether
# its workers survived that fault (see report: worker processes taking no jobs).
FULL_SCHEDULE = (
    ScheduledFault(5, FaultKind.KILL_WORKER),
    ScheduledFault(11, FaultKind.KILL_SERVE),
    ScheduledFault(17, FaultKind.KILL_BOTH),
    ScheduledFault(24, FaultKind.PG_RESTART_FAST),
    ScheduledFault(32, FaultKind.PG_RESTART_IMMEDIATE),
    ScheduledFault(42, FaultKind.PG_STOP_START),
    ScheduledFault(54, FaultKind.PG_RESTART_FAST),
    ScheduledFault(62, FaultKind.PG_RESTART_IMMEDIATE),
    ScheduledFault(72, FaultKind.PG_RESTART_FAST),
)
QUICK_SCHEDULE = (
    ScheduledFault(2, FaultKind.KILL_SERVE),
    ScheduledFault(6, FaultKind.PG_RESTART_FAST),
    ScheduledFault(11, FaultKind.KILL_WORKER),
    ScheduledFault(14, FaultKind.PG_RESTART_IMMEDIATE),
    ScheduledFault(22, FaultKind.PG_STOP_START),
)
# SQLite has no server to restart: only the SIGKILLs apply.
SQLITE_FULL_SCHEDULE = (
    ScheduledFault(5, FaultKind.KILL_WORKER),
    ScheduledFault(14, FaultKind.KILL_SERVE),
    ScheduledFault(24, FaultKind.KILL_BOTH),
    ScheduledFault(34, FaultKind.KILL_SERVE),
    ScheduledFault(44, FaultKind.KILL_WORKER),
    ScheduledFault(54, FaultKind.KILL_BOTH),
    ScheduledFault(64, FaultKind.KILL_SERVE),
    ScheduledFault(76, FaultKind.KILL_BOTH),
)
SQLITE_QUICK_SCHEDULE = (
    ScheduledFault(3, FaultKind.KILL_SERVE),
    ScheduledFault(9, FaultKind.KILL_WORKER),
    ScheduledFault(14, FaultKind.KILL_BOTH),
    ScheduledFault(24, FaultKind.KILL_SERVE),
)


@dataclass(frozen=True)
class Plan:
    store: str  # "postgres" | "sqlite"
    quick: bool
    seed: int
    # load
    load_seconds: float
    clients: int
    rate: float  # new deliveries per second, all clients together
    in_flight_per_client: int
    redelivery_share: float  # a later re-send of an id already sent (provider redelivery)
    twin_share: float  # a new id sent twice at once
    request_timeout: float
    give_up_seconds: float  # a provider gives up on one id after this long (bounded run)
    max_attempts_per_id: int
    settle_seconds: float  # after the load: how long unacknowledged ids keep retrying
    # faults
    schedule: tuple[ScheduledFault, ...]
    stop_seconds: float  # how long pg-stop-start keeps the server down
    recovery_bound: float  # how long a recovery probe waits for a 2xx / a forward
    # sink
    sink_error_share: float
    sink_slow_share: float
    # hookinbox
    lease_seconds: int
    forward_timeout: float
    max_attempts: int
    # bounds
    start_bound: float
    drain_seconds: float
    max_total_seconds: float
    separate_worker: bool = True
    keep_workdir: bool = False
    json_path: str | None = None

    @property
    def postgres(self) -> bool:
        return self.store == "postgres"


def parse_args(argv: list[str] | None = None) -> Plan:
    parser = argparse.ArgumentParser(
        prog="make chaos",
        description="Signed load while PostgreSQL restarts and hookinbox processes are "
        "SIGKILLed, then a check that every acknowledged id is stored and forwarded once.",
    )
    parser.add_argument("--quick", action="store_true", help="about a minute in all")
    parser.add_argument("--store", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument("--load-seconds", type=float, default=None)
    parser.add_argument("--clients", type=int, default=None)
    parser.add_argument("--rate", type=float, default=None, help="new deliveries per second")
    parser.add_argument(
        "--no-worker",
        action="store_true",
        help="no separate `hookinbox worker`: serve's own workers must forward everything",
    )
    parser.add_argument(
        "--keep-workdir", action="store_true", help="keep config, logs and sink records"
    )
    parser.add_argument("--json", dest="json_path", default=None, help="also write the figures")
    args = parser.parse_args(argv)

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    schedule: tuple[ScheduledFault, ...]
    if args.store == "postgres":
        schedule = QUICK_SCHEDULE if args.quick else FULL_SCHEDULE
    else:
        schedule = SQLITE_QUICK_SCHEDULE if args.quick else SQLITE_FULL_SCHEDULE
    plan = Plan(
        store=args.store,
        quick=args.quick,
        seed=seed,
        load_seconds=36 if args.quick else 90,
        clients=8 if args.quick else 16,
        rate=100 if args.quick else 150,
        in_flight_per_client=4,
        redelivery_share=0.08,
        twin_share=0.04,
        request_timeout=5.0,
        give_up_seconds=45,
        max_attempts_per_id=30,
        settle_seconds=8 if args.quick else 15,
        schedule=schedule,
        stop_seconds=3 if args.quick else 5,
        recovery_bound=15 if args.quick else 25,
        sink_error_share=0.03,
        sink_slow_share=0.01,
        lease_seconds=4,
        forward_timeout=1.0,
        max_attempts=12,
        start_bound=30,
        drain_seconds=15 if args.quick else 40,
        max_total_seconds=90 if args.quick else 210,
        separate_worker=not args.no_worker,
        keep_workdir=args.keep_workdir,
        json_path=args.json_path,
    )
    if args.load_seconds is not None:
        plan = replace(plan, load_seconds=args.load_seconds)
    if args.clients is not None:
        plan = replace(plan, clients=max(1, args.clients))
    if args.store == "sqlite" and args.rate is None:
        # Measured here: forwards on one SQLite file shared by serve and a worker (every
        # claim, ledger row and completion a synchronous=FULL commit) fall behind ~150/s
        # intake, and recovery times would then measure the backlog, not the recovery.
        plan = replace(plan, rate=60 if args.quick else 80)
    if args.rate is not None:
        plan = replace(plan, rate=max(1.0, args.rate))
    return plan
