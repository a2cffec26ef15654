"""Where a hookinbox answer waited during one wrk run, from the server's own histograms.

wrk's p99 is the whole round trip: the client, the kernel, the server reading the
request, the handler, the write of the answer. The server times its part itself
(``/metrics``): from the moment the request was whole to its answer
(``hookinbox_answer_seconds``: the event loop's queue before the handler included),
and within it each reservation batch's gathering and commit
(``hookinbox_reserve_seconds``), its size, and the garbage collector's pauses of the
whole process. Read before and after a run, the difference says whether a client's
slow answer was slow inside the server (a commit, a batch's wait, the loop's queue, a
pause) or outside it; PostgreSQL's checkpoints during the run are counted beside them
(a checkpoint's writes compete with the commits for the disk).
"""

from __future__ import annotations

import asyncio
import re
import urllib.request
from collections import defaultdict

from harness import HOST, pg_dsn

#: The histograms read, by metric name (without the ``_bucket``/``_sum``/``_count``).
_NAMES = (
    "hookinbox_answer_seconds",
    "hookinbox_reserve_seconds",
    "hookinbox_reserve_batch_size",
    "hookinbox_gc_pause_seconds",
)
_SAMPLE = re.compile(r"^(\w+?)_(bucket|sum|count)(?:\{([^}]*)\})? (\S+)$")
_LE = re.compile(r',?le="([^"]+)"')
#: The answer time the bench's p99 aim is set at.
SLOW_S = 0.010

Samples = dict[tuple[str, str, str, float], float]


def scrape(port: int) -> Samples | None:
    """The histograms' samples, keyed (name, part, labels without ``le``, le); None when
    the server does not answer ``/metrics`` (the figure is then left out, not guessed)."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    found: Samples = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None or m[1] not in _NAMES:
            continue
        labels = m[3] or ""
        le = _LE.search(labels)
        bound = float(le[1]) if le else 0.0
        found[(m[1], m[2], _LE.sub("", labels).strip(","), bound)] = float(m[4])
    return found


def waits_between(before: Samples | None, after: Samples | None) -> dict[str, float] | None:
    """What the server's histograms say of the run between two scrapes: means in ms and
    the shares of answers and of commits over :data:`SLOW_S`."""
    if before is None or after is None:
        return None
    delta: Samples = {k: v - before.get(k, 0.0) for k, v in after.items()}
    totals: dict[tuple[str, str], float] = defaultdict(float)
    counts: dict[tuple[str, str], float] = defaultdict(float)
    under_slow: dict[tuple[str, str], float] = defaultdict(float)
    for (name, part, labels, le), value in delta.items():
        key = (name, _phase(labels))
        if part == "sum":
            totals[key] += value
        elif part == "count":
            counts[key] += value
        elif part == "bucket" and abs(le - SLOW_S) < 1e-12:
            under_slow[key] += value

    def mean(name: str, phase: str = "", scale: float = 1000.0) -> float:
        n = counts[(name, phase)]
        return totals[(name, phase)] / n * scale if n else 0.0

    def over_slow(name: str, phase: str = "") -> float:
        n = counts[(name, phase)]
        return (n - under_slow[(name, phase)]) / n if n else 0.0

    answers = counts[("hookinbox_answer_seconds", "")]
    if not answers:
        return None
    pauses = sum(n for (name, _), n in counts.items() if name == "hookinbox_gc_pause_seconds")
    paused = sum(t for (name, _), t in totals.items() if name == "hookinbox_gc_pause_seconds")
    return {
        "answers": answers,
        "answer_mean_ms": mean("hookinbox_answer_seconds"),
        "answer_over_10ms": over_slow("hookinbox_answer_seconds"),
        "gather_mean_ms": mean("hookinbox_reserve_seconds", "gather"),
        "commit_mean_ms": mean("hookinbox_reserve_seconds", "commit"),
        "commit_over_10ms": over_slow("hookinbox_reserve_seconds", "commit"),
        "batch_mean": mean("hookinbox_reserve_batch_size", scale=1.0),
        "gc_pauses": pauses,
        "gc_paused_ms": paused * 1000,
    }


def _phase(labels: str) -> str:
    """The one label that splits a histogram here (``phase``); the others (``source``,
    ``generation``) are summed over."""
    m = re.search(r'phase="([^"]+)"', labels)
    return m[1] if m else ""


async def _checkpoints() -> int:
    import asyncpg

    conn = await asyncpg.connect(pg_dsn("postgres"), timeout=5)
    try:
        row = await conn.fetchrow(
            "SELECT checkpoints_timed + checkpoints_req AS n FROM pg_stat_bgwriter"
        )
    finally:
        await conn.close()
    return int(row["n"])


def pg_checkpoints() -> int | None:
    """Checkpoints the PostgreSQL cluster has made so far (timed or asked for); None
    when it cannot be read."""
    try:
        return asyncio.run(_checkpoints())
    except Exception:
        return None


def describe(waits: dict[str, float]) -> str:
    """One log line's worth."""
    checkpoints = waits.get("checkpoints")
    return (
        f"server answer mean {waits['answer_mean_ms']:.1f} ms, "
        f"> 10 ms {waits['answer_over_10ms']:.1%}; "
        f"batch {waits['batch_mean']:.1f} deliveries, gather {waits['gather_mean_ms']:.1f} ms"
        f" + commit {waits['commit_mean_ms']:.1f} ms (> 10 ms {waits['commit_over_10ms']:.1%});"
        f" gc pauses {waits['gc_pauses']:.0f} ({waits['gc_paused_ms']:.1f} ms)"
        + (f"; checkpoints {checkpoints:.0f}" if checkpoints is not None else "")
    )
