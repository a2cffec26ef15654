"""Mode ``scaleout`` (opt-in, PostgreSQL): the suite's scale-out scenario at bench size.

``tests/e2e/test_scale_out.py`` starts 2 ``hookinbox serve --no-workers`` and 3
``hookinbox worker`` processes on one PostgreSQL schema, sends N deliveries (30% repeats)
to both receivers at once and checks the exact counts: one journal row per event id, one
completed job per route, one effect per key at a counting sink. Here it runs with
``--scale-out-deliveries`` (20,000) and the figures it prints are reported: send time and
accepted/s, the time until every job completed, jobs/s, forwards sent again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARK = "scale-out: "


def run_scale_out(deliveries: int, timeout_s: float = 900) -> dict[str, object]:
    """The scenario once; its figures, or ``{"error": ...}`` when its checks failed."""
    env = {**os.environ, "HOOKINBOX_SCALE_OUT_DELIVERIES": str(deliveries)}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-s",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
    ]
    cmd.append("tests/e2e/test_scale_out.py")
    try:
        proc = subprocess.run(
            cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish in {timeout_s:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(MARK) and proc.returncode == 0:
            figures: dict[str, object] = json.loads(line[len(MARK) :])
            return figures
    tail = "\n".join(proc.stdout.strip().splitlines()[-15:])
    return {"error": f"the scenario failed (exit {proc.returncode}):\n{tail}"}


def report(result: dict[str, object]) -> None:
    print("== scale-out: 2 receivers + 3 workers (separate processes), one PostgreSQL,")
    print("   30% repeats sent at once to both receivers; exact counts checked by the test")
    if "error" in result:
        print(f"   FAILED: {result['error']}")
        return
    print(
        f"   {result['deliveries']:,} deliveries ({result['events']:,} events): sent in "
        f"{result['send_s']} s ({result['accepted_per_s']:,}/s), every job completed after "
        f"{result['all_done_s']} s ({result['jobs_per_s']:,} jobs/s), forwards sent again: "
        f"{result['forwards_sent_again']}; counts exact"
    )
