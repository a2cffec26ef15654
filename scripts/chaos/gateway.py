"""The hookinbox under test: its config file and the commands that run it (CLI only).

One Standard Webhooks source whose secret is in an environment variable, one route that
forwards every event to the sink. Short leases, backoff and forward timeout so that the
drain after the faults fits the run's bounds.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

from .plan import Plan

SOURCE = "chaos"
ACTION = "forward"
SECRET_ENV = "HOOKINBOX_CHAOS_SECRET"
_TASK_NAME = re.compile(r"Task-\d+")
#: What uvicorn prints when the app's lifespan shutdown raised.
SHUTDOWN_FAILED = "Application shutdown failed"


def hookinbox_command() -> str:
    """The ``hookinbox`` of the interpreter running us (the project's .venv)."""
    beside = Path(sys.executable).with_name("hookinbox")
    if beside.exists():
        return str(beside)
    found = shutil.which("hookinbox")
    if found is None:
        raise RuntimeError("hookinbox is not installed in this environment (run make venv)")
    return found


def write_config(path: Path, plan: Plan, database: str, port: int, sink_port: int) -> None:
    path.write_text(
        f"""# Written by `make chaos` for one run; removed with its work directory.
database = "{database}"

[server]
host = "127.0.0.1"
port = {port}

[worker]
concurrency = 8
max_attempts = {plan.max_attempts}
backoff_base_seconds = 0.2
backoff_max_seconds = 2
lease_seconds = {plan.lease_seconds}
poll_interval_seconds = 0.5
job_timeout_seconds = 10

[operations]
purge_interval = "off"

[sources.{SOURCE}]
scheme = "standard-webhooks"
secret_env = "{SECRET_ENV}"
tolerance_seconds = 300

[[sources.{SOURCE}.routes]]
events = ["*"]
action = "{ACTION}"
forward = "http://127.0.0.1:{sink_port}/internal/{SOURCE}"
forward_timeout_seconds = {plan.forward_timeout}
""",
        encoding="utf-8",
    )


def serve_argv(config: Path) -> list[str]:
    return [hookinbox_command(), "serve", "--config", str(config), "--log-level", "warning"]


def worker_argv(config: Path) -> list[str]:
    return [hookinbox_command(), "worker", "--config", str(config), "--log-level", "warning"]


def migrate_argv(config: Path) -> list[str]:
    return [hookinbox_command(), "migrate", "--config", str(config)]


def log_events(path: Path) -> tuple[Counter[str], Counter[str]]:
    """A process's log, summed up: its JSON warnings and errors by ``level event code``,
    and the lines that are not JSON (hookinbox promises JSON lines on stderr), counted by
    their text; of a traceback only the message lines, not every frame."""
    events: Counter[str] = Counter()
    others: Counter[str] = Counter()
    if not path.exists():
        return events, others
    for line in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            if line.strip() and not line.startswith((" ", "Traceback ", "During handling")):
                others[_TASK_NAME.sub("Task-N", line.strip())[:110]] += 1
            continue
        if not isinstance(entry, dict):
            continue
        level = str(entry.get("level", ""))
        if level in ("warning", "error", "critical"):
            code = entry.get("code") or entry.get("error") or entry.get("error_code") or ""
            if entry.get("event") == "library_log":  # a library's record: which, and what
                code = f"{entry.get('logger')}: {entry.get('message')} {code}".strip()
            events[f"{level} {entry.get('event', '?')} {code}".strip()] += 1
    return events, others
