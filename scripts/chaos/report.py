"""The invariants, checked against what the clients saw, the journal and the sink; the figures.

An invariant holds when its count is 0. The run fails (exit 1) when one does not.

- acknowledged but not stored: a 2xx was answered for an id the journal does not hold;
- stored but not forwarded: after the drain, a stored id the sink never answered 200 for,
  unless its job is a dead letter (listed with its reason, counted apart);
- forwarded under two or more keys: one event id reached the sink under distinct
  Idempotency-Keys (the same key more than once is allowed: at-least-once, stable key);
- answered "accepted" twice: one id was reserved twice;
- completed but never forwarded: a job marked completed whose key the sink never answered 200;
- forwards that are no job: a key that is no job id, or whose X-Hookinbox-Event-Id is not
  the event of that job;
- forwards whose signature fails: the forwarded raw body and provider headers no longer
  verify (a POST cut short because its worker was SIGKILLed mid-send is not counted);
- refused (4xx) answers to the load, and stored ids no client sent;
- the queue drained within its bound;
- every worker process (``serve`` runs workers too) kept taking jobs while it was alive
  under load: no more than 5 s at the end of its life without an attempt, not counting
  the time a fault kept the store or the receiver down;
- no hookinbox process ended on its own other than with exit 3 (store unreachable, e.g.
  restarted while PostgreSQL is down): exit 1 is an exception nobody caught;
- every process stopped cleanly on SIGTERM at the end: exit 0 (or the SIGTERM re-raised
  by uvicorn), and no "Application shutdown failed" in its log (``serve``'s lifespan
  shutdown re-raises the exception its worker task died of).
"""

from __future__ import annotations

import json
import signal
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .faults import FaultOutcome
from .journal import Journal
from .load import Tally
from .plan import Plan
from .processes import CHAOS, OWN, STOPPED, Supervised
from .sink import CUT, OK, SinkRecord

EXAMPLES = 5
#: A worker process alive and under load that made no attempt for this long is suspect.
SILENT_WORKER_SECONDS = 5.0


@dataclass(frozen=True)
class Invariant:
    name: str
    count: int
    examples: tuple[str, ...] = ()

    @property
    def holds(self) -> bool:
        return self.count == 0


@dataclass(frozen=True)
class Drain:
    drained: bool
    seconds: float
    bound: float
    counts: dict[str, int]
    at_load_end: dict[str, int]


@dataclass
class Report:
    plan: Plan
    target: str
    figures: dict[str, Any] = field(default_factory=dict)
    invariants: list[Invariant] = field(default_factory=list)
    dead_letters: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(invariant.holds for invariant in self.invariants)


def _examples(items: Any) -> tuple[str, ...]:
    return tuple(sorted(str(item) for item in items)[:EXAMPLES])


def build_report(
    plan: Plan,
    target: str,
    tally: Tally,
    journal: Journal,
    records: list[SinkRecord],
    faults: list[FaultOutcome],
    processes: list[Supervised],
    drain: Drain,
    wall_seconds: float,
    load_window: tuple[float, float],
    failed_shutdowns: list[str],
) -> Report:
    report = Report(plan, target)
    stored = journal.event_ids
    jobs = journal.jobs()
    job_event = {row.job_id: row.event_id for row in jobs if row.job_id is not None}
    ok_keys = {r.key for r in records if r.outcome == OK}
    ok_events = {r.event_id for r in records if r.outcome == OK}
    keys_by_event: defaultdict[str, set[str]] = defaultdict(set)
    for record in records:
        keys_by_event[record.event_id].add(record.key)

    dead = {row.event_id: row for row in jobs if row.state == "failed"}
    not_forwarded = stored - ok_events
    report.dead_letters = [
        f"{event_id}: job {row.job_id} after {row.attempts} attempts, last_error={row.last_error}"
        for event_id, row in sorted(dead.items())
        if event_id in not_forwarded
    ]
    completed_unforwarded = [
        row.job_id for row in jobs if row.state == "completed" and row.job_id not in ok_keys
    ]
    foreign = [
        f"{r.key} (event {r.event_id})"
        for r in records
        if r.key not in job_event or job_event[r.key] != r.event_id
    ]
    report.invariants = [
        Invariant("acknowledged but not stored", *_pair(tally.acknowledged - stored)),
        Invariant("stored but not forwarded (not dead letters)", *_pair(not_forwarded - set(dead))),
        Invariant(
            "ids forwarded under 2+ distinct keys",
            *_pair(e for e, keys in keys_by_event.items() if len(keys) > 1),
        ),
        Invariant(
            'ids answered "accepted" more than once',
            *_pair(e for e, n in tally.accepted_answers.items() if n > 1),
        ),
        Invariant("jobs completed but never forwarded ok", *_pair(completed_unforwarded)),
        Invariant("forwards whose key is no job of that event", *_pair(foreign)),
        Invariant(
            "forwards whose provider signature fails",
            *_pair(r.key for r in records if r.outcome != CUT and not r.signed),
        ),
        Invariant(
            "deliveries refused with a 4xx", *_pair(f"{i}: {a}" for i, a in tally.refused.items())
        ),
        Invariant("stored ids no client sent", *_pair(stored - tally.sent)),
        Invariant(
            "jobs still waiting or leased after the drain",
            0 if drain.drained else sum(drain.counts.get(s, 0) for s in ("accepted", "processing")),
            (f"after {drain.seconds:.1f} s: {dict(drain.counts)}",) if not drain.drained else (),
        ),
    ]

    forwards_after_ok = _forwards_after_ok(records)
    lives = _worker_lives(processes, journal, load_window, faults)
    silent = [
        f"{x['process']} pid {x['pid']}: no job attempt in its last {x['silent_at_end']} s "
        "of load (outside faults) while alive"
        for x in lives
        if x["silent_at_end"] > SILENT_WORKER_SECONDS
    ]
    report.invariants.append(
        Invariant("worker processes alive under load, taking no jobs", *_pair(silent))
    )
    # hookinbox's documented exit codes: 2 config, 3 store, 4 not found, 5 refused; 3 is
    # expected from a process restarted while the store is down. Anything else on its own
    # (exit 1: an exception nobody caught; a signal we did not send) is a crash.
    crashed = [
        f"{p.name} pid {e.pid}: {e.how}"
        for p in processes
        if p.name != "sink"
        for e in p.exits_by(OWN)
        if e.returncode != 3
    ]
    report.invariants.append(
        Invariant("hookinbox processes that crashed on their own", *_pair(crashed))
    )
    # A clean stop: exit 0, or the SIGTERM re-raised after a graceful shutdown (uvicorn
    # re-raises it even when the shutdown failed, so the log is read too, in run).
    unclean = [
        f"{p.name} pid {e.pid}: {e.how}"
        for p in processes
        if p.name != "sink"
        for e in p.exits_by(STOPPED)
        if e.returncode not in (0, -signal.SIGTERM)
    ]
    report.invariants.append(
        Invariant(
            "hookinbox processes not stopping cleanly on SIGTERM",
            *_pair(unclean + failed_shutdowns),
        )
    )
    report.figures = {
        "store": plan.store,
        "target": target,
        "seed": plan.seed,
        "wall_seconds": round(wall_seconds, 1),
        "load": {
            "seconds": plan.load_seconds,
            "clients": plan.clients,
            "rate_target": plan.rate,
            "ids_sent": len(tally.sent),
            "redeliveries": tally.redeliveries,
            "concurrent_twins": tally.twins,
            "requests": tally.requests,
            "retries": tally.retries,
            "answers": dict(tally.answers.most_common()),
            "probe_answers": dict(tally.probe_answers.most_common()),
            "acknowledged": len(tally.acknowledged),
            "given_up": len(tally.given_up),
            "given_up_stored": len(set(tally.given_up) & stored),
        },
        "journal": {
            "stored_ids": len(stored),
            "stored_not_acknowledged": len(stored - tally.acknowledged),
            "receipts_counted": sum(row.delivery_count for row in _one_per_delivery(journal)),
            "jobs": dict(journal.states().most_common()),
            "attempts": sum(row.attempts or 0 for row in jobs),
            "attempts_by_outcome": dict(journal.by_outcome),
            "dead_letters": len(dead),
        },
        "worker_lives": lives,
        "sink": {
            "forwards": len(records),
            "distinct_keys": len({r.key for r in records}),
            "distinct_events": len(keys_by_event),
            "answered": dict(Counter(r.outcome for r in records).most_common()),
            "same_key_repeats": len(records) - len({r.key for r in records}),
            "repeats_after_an_ok": forwards_after_ok,
        },
        "drain": {
            "drained": drain.drained,
            "seconds": round(drain.seconds, 1),
            "bound": drain.bound,
            "queue_at_load_end": drain.at_load_end,
        },
        "faults": [
            {
                "kind": f.kind.value,
                "at": round(f.at, 1),
                "took": round(f.took, 2),
                "answered_after": None if f.answered is None else round(f.answered, 2),
                "forwarded_after": None if f.forwarded is None else round(f.forwarded, 2),
                "outage": None if f.outage is None else round(f.outage, 2),
                "note": f.note,
            }
            for f in faults
        ],
        "processes": {
            p.name: {
                "starts": p.starts,
                "sigkilled": len(p.exits_by(CHAOS)),
                "other_exits": [e.how for e in p.exits_by(OWN)],
                "stopped": [e.how for e in p.exits_by(STOPPED)],
            }
            for p in processes
        },
        "invariants": {i.name: i.count for i in report.invariants},
        "passed": report.passed,
    }
    for p in processes:
        for e in p.exits_by(OWN):
            report.notes.append(f"{p.name} pid {e.pid} exited on its own ({e.how})")
    for f in faults:
        if f.note.startswith(("skipped", "fault failed")):
            report.notes.append(f"{f.kind.value} at {f.at:.0f} s: {f.note}")
        elif f.answered is None:
            report.notes.append(
                f"{f.kind.value} at {f.at:.0f} s: no 2xx within {plan.recovery_bound:.0f} s"
            )
        elif f.forwarded is None:
            report.notes.append(
                f"{f.kind.value} at {f.at:.0f} s: probe not forwarded within "
                f"{plan.recovery_bound:.0f} s of its 2xx (or before the settle window ended)"
            )
    if tally.given_up:
        report.notes.append(
            f"{len(tally.given_up)} ids never acknowledged within the run's bounds "
            f"(a real provider keeps retrying for hours); e.g. "
            + ", ".join(f"{i} ({a})" for i, a in sorted(tally.given_up.items())[:3])
        )
    return report


def _worker_lives(
    processes: list[Supervised],
    journal: Journal,
    load_window: tuple[float, float],
    faults: list[FaultOutcome],
) -> list[dict[str, Any]]:
    """Job attempts per process life we started (``serve`` runs workers too), and how long
    each stayed alive under load without taking a job at the end of its life, not counting
    the time a fault kept the store or the receiver down."""
    by_pid = {w.pid: w for w in journal.by_worker}
    load_start, load_end = load_window
    outages = [
        (load_start + f.at, load_start + f.at + (f.outage if f.outage is not None else f.took))
        for f in faults
    ]
    lives: list[dict[str, Any]] = []
    for process in processes:
        if process.name == "sink":
            continue
        for life in process.lives:
            attempts = by_pid.get(life.pid)
            ended = life.ended if life.ended is not None else load_end
            quiet_from = max(attempts.last if attempts else life.started, life.started, load_start)
            quiet_to = min(ended, load_end)
            quiet = max(0.0, quiet_to - quiet_from) - sum(
                max(0.0, min(b, quiet_to) - max(a, quiet_from)) for a, b in outages
            )
            lives.append(
                {
                    "process": process.name,
                    "pid": life.pid,
                    "from": round(life.started - load_start, 1),
                    "to": round(ended - load_start, 1),
                    "attempts": attempts.count if attempts else 0,
                    "last_attempt": None
                    if attempts is None
                    else round(attempts.last - load_start, 1),
                    "silent_at_end": round(quiet, 1),
                }
            )
    return lives


def _pair(items: Any) -> tuple[int, tuple[str, ...]]:
    listed = list(items)
    return len(listed), _examples(listed)


def _one_per_delivery(journal: Journal) -> list[Any]:
    seen: dict[str, Any] = {}
    for row in journal.rows:
        seen.setdefault(row.delivery_id, row)
    return list(seen.values())


def _forwards_after_ok(records: list[SinkRecord]) -> int:
    """Forwards of a key the sink had already answered 200 (a crash or timeout before the
    worker recorded the completion): the at-least-once part of the contract."""
    ok_seen: set[str] = set()
    after = 0
    for record in sorted(records, key=lambda r: r.at):
        if record.key in ok_seen:
            after += 1
        if record.outcome == OK:
            ok_seen.add(record.key)
    return after


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


def render(report: Report) -> str:
    f = report.figures
    load, journal, sink, drain = f["load"], f["journal"], f["sink"], f["drain"]
    lines = [
        "",
        f"hookinbox chaos: store {f['store']} ({f['target']}), seed {f['seed']}, "
        f"{f['wall_seconds']} s wall",
        "",
        f"load ({load['seconds']:.0f} s, {load['clients']} clients, "
        f"{load['rate_target']:.0f} new ids/s target)",
        f"  ids sent                         {load['ids_sent']:>8}"
        f"   (+{load['redeliveries']} redeliveries, +{load['concurrent_twins']} concurrent twins)",
        f"  requests                         {load['requests']:>8}   ({load['retries']} retries)",
        f"  acknowledged ids (2xx)           {load['acknowledged']:>8}",
        f"  given up without a 2xx           {load['given_up']:>8}"
        f"   ({load['given_up_stored']} of them stored all the same)",
        "  answers seen by the clients:",
        *[f"    {label:<36} {count:>8}" for label, count in load["answers"].items()],
        "  answers seen by the recovery probes:",
        *[f"    {label:<36} {count:>8}" for label, count in load["probe_answers"].items()],
        "",
        "faults (answered/forwarded: from the end of the fault; outage: from its start)",
        f"  {'at':>6}  {'fault':<22} {'took':>8} {'answered':>9} {'forwarded':>10} "
        f"{'outage':>8}  note",
        *[
            f"  {x['at']:>5.1f}s  {x['kind']:<22} {_seconds(x['took']):>8} "
            f"{_seconds(x['answered_after']):>9} {_seconds(x['forwarded_after']):>10} "
            f"{_seconds(x['outage']):>8}  {x['note']}"
            for x in f["faults"]
        ],
        "",
        "processes",
        *[
            f"  {name:<8} started {p['starts']}x, SIGKILLed {p['sigkilled']}x, "
            f"exits on its own: {', '.join(p['other_exits']) or 'none'}; "
            f"at the end, on SIGTERM: {', '.join(p['stopped']) or '-'}"
            for name, p in f["processes"].items()
        ],
        "  job attempts per process life (seconds from the start of the load):",
        *[
            f"    {x['process']:<7} pid {x['pid']:<8} {x['from']:>6.1f} .. {x['to']:>6.1f} s"
            f"  attempts {x['attempts']:>6}  last at {x['last_attempt']} s,"
            f" then silent {x['silent_at_end']} s"
            for x in f["worker_lives"]
        ],
        "",
        f"drain: {'queue empty' if drain['drained'] else 'NOT drained'} after "
        f"{drain['seconds']} s (bound {drain['bound']:.0f} s); jobs when the load stopped: "
        + (", ".join(f"{k} {v}" for k, v in sorted(drain["queue_at_load_end"].items())) or "—"),
        "",
        "journal",
        f"  stored ids (deliveries)          {journal['stored_ids']:>8}",
        f"  stored, never acknowledged       {journal['stored_not_acknowledged']:>8}"
        "   (committed, answer lost or client gave up: still forwarded)",
        f"  receipts (sum of delivery_count) {journal['receipts_counted']:>8}",
        f"  job attempts                     {journal['attempts']:>8}",
        "  attempts by outcome: "
        + ", ".join(f"{k} {v}" for k, v in journal["attempts_by_outcome"].items()),
        "  jobs: " + ", ".join(f"{k} {v}" for k, v in journal["jobs"].items()),
        f"  dead letters                     {journal['dead_letters']:>8}",
        "",
        "sink",
        f"  forwards (POSTs)                 {sink['forwards']:>8}",
        f"  distinct Idempotency-Keys        {sink['distinct_keys']:>8}",
        f"  distinct event ids               {sink['distinct_events']:>8}",
        f"  same-key repeats (allowed)       {sink['same_key_repeats']:>8}"
        f"   ({sink['repeats_after_an_ok']} after the sink had answered 200)",
        "  answered: " + ", ".join(f"{k} {v}" for k, v in sink["answered"].items()),
        "",
        "invariants (each must be 0)",
    ]
    for invariant in report.invariants:
        mark = "ok  " if invariant.holds else "FAIL"
        lines.append(f"  [{mark}] {invariant.name:<52} {invariant.count:>6}")
        lines.extend(f"           e.g. {example}" for example in invariant.examples)
    if report.dead_letters:
        lines += ["", "dead letters (stored, not forwarded, with their reason)"]
        lines += [f"  {d}" for d in report.dead_letters[:20]]
    if report.notes:
        lines += ["", "notes"]
        lines += [f"  - {note}" for note in report.notes]
    lines += ["", "result: " + ("PASS" if report.passed else "FAIL"), ""]
    return "\n".join(lines)


def write_json(report: Report, path: Path) -> None:
    data = dict(report.figures, dead_letters=report.dead_letters, notes=report.notes)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
