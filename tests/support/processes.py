"""Real hookinbox processes for the end-to-end and crash scenarios.

Every process is started by the test, stopped by its own PID, and every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(
    predicate: Callable[[], object], timeout: float, what: str, step: float = 0.05
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def hookinbox_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


class HookinboxProcess:
    """``hookinbox ARGS...`` as a child process with its output in a log file."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.args = args
        self.env = env
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> HookinboxProcess:
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hookinbox.cli", *self.args],
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def wait_healthy(self, base_url: str, timeout: float = 20.0) -> None:
        def healthy() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"process exited: {self.log_path.read_text()[-2000:]}")
            try:
                return httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(healthy, timeout, f"{base_url}/healthz")

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to clean up."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._log.close()

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


def run_hookinbox(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``hookinbox ARGS... --config CONFIG`` to its end (a minute at most), output kept."""
    return subprocess.run(
        [sys.executable, "-m", "hookinbox.cli", *args, "--config", str(config)],
        env=hookinbox_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
