"""The suite without its PostgreSQL: outside CI the PostgreSQL half skips with one line that
names why; in CI the run stops with that line, so a missing server is never green."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.processes import REPO, free_port

PROBE = (
    "tests/store/test_contract.py::test_a_batch_is_answered_in_order_with_accepted_and_duplicates"
)


def run_suite_without_postgres(*, ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["HOOKINBOX_TEST_PG_URL"] = f"postgresql://postgres@127.0.0.1:{free_port()}/test"
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", PROBE],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_outside_ci_the_postgres_tests_skip_with_one_line_naming_why() -> None:
    done = run_suite_without_postgres(ci=False)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "1 passed, 1 skipped" in done.stdout
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 1 and "is not reachable" in skipped[0], done.stdout[-2000:]


def test_in_ci_the_run_stops_when_postgres_is_missing() -> None:
    done = run_suite_without_postgres(ci=True)
    assert done.returncode == 3, done.stdout[-2000:]
    assert "is not reachable" in done.stdout + done.stderr
