"""Running an example the way its README says: one command, in a subprocess, bounded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.processes import REPO, hookinbox_env

EXAMPLES = REPO / "examples"


def run_example(
    name: str, tmp_path: Path, *args: str, timeout: float = 90
) -> tuple[str, dict[str, Any]]:
    """``python examples/NAME/run.py ARGS --summary FILE``: its output and its summary."""
    summary = tmp_path / f"{name}-summary.json"
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name / "run.py"), *args, "--summary", str(summary)],
        env=hookinbox_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, json.loads(summary.read_text())
