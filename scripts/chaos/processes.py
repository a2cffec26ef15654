"""Processes we start (hookinbox serve, hookinbox worker, the sink), kept up like a supervisor.

Each process is tracked by its PID and killed only by that PID. ``supervise`` restarts a
process that exited (after a SIGKILL from the fault schedule, or on its own, which the
report counts separately), with a short delay that grows while it keeps dying at start
(``serve`` exits 3 when the store is down at start-up). On Linux a child also gets
PR_SET_PDEATHSIG, so it dies with this process even if this one is SIGKILLed.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

RESTART_DELAY = 0.5
RESTART_DELAY_MAX = 4.0
#: A process that lived shorter than this is "dying at start": the delay doubles.
SHORT_LIFE = 3.0
POLL = 0.05


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


#: Why a process ended: SIGKILLed by the fault schedule, stopped by us at the end, or on
#: its own (a crash, or an exit at start-up while the store was down).
CHAOS, STOPPED, OWN = "chaos", "stopped", "own"


@dataclass(frozen=True)
class Exit:
    at: float
    pid: int
    returncode: int
    cause: str

    @property
    def how(self) -> str:
        if self.returncode < 0:
            return signal.Signals(-self.returncode).name
        return f"exit {self.returncode}"


@dataclass
class Life:
    """One process we started: its PID and when it lived (seconds since the epoch)."""

    pid: int
    started: float
    ended: float | None = None


@dataclass
class Supervised:
    name: str
    argv: Sequence[str]
    env: Mapping[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    starts: int = field(default=0, init=False)
    exits: list[Exit] = field(default_factory=list, init=False)
    lives: list[Life] = field(default_factory=list, init=False)
    stopping: bool = field(default=False, init=False)
    _started_at: float = field(default=0.0, init=False)
    _causes: dict[int, str] = field(default_factory=dict, init=False)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                list(self.argv),
                env=dict(self.env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C in the terminal reaches us, not them
                preexec_fn=_die_with_parent,
            )
        self.starts += 1
        self._started_at = time.monotonic()
        self.lives.append(Life(self.process.pid, time.time()))

    def kill(self) -> int | None:
        """SIGKILL the current process (by its PID); the supervisor restarts it."""
        process = self.process
        if process is None or process.poll() is not None:
            return None
        self._causes[process.pid] = CHAOS
        process.send_signal(signal.SIGKILL)
        return process.pid

    def _reap(self) -> float | None:
        """Record the exit of the current process; returns how long it lived, or None."""
        process = self.process
        if process is None or process.poll() is None:
            return None
        cause = self._causes.get(process.pid, OWN)
        self.exits.append(Exit(time.time(), process.pid, process.returncode, cause))
        for life in self.lives:
            if life.pid == process.pid and life.ended is None:
                life.ended = time.time()
        self.process = None
        return time.monotonic() - self._started_at

    async def supervise(self) -> None:
        """Restart the process whenever it exits, until ``stop`` (cancel-safe)."""
        delay = RESTART_DELAY
        while not self.stopping:
            lived = self._reap()
            if lived is None:
                await asyncio.sleep(POLL)
                continue
            delay = min(delay * 2, RESTART_DELAY_MAX) if lived < SHORT_LIFE else RESTART_DELAY
            await asyncio.sleep(delay)
            if not self.stopping:
                self.start()

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; no restart afterwards."""
        self.stopping = True
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            self._causes[process.pid] = STOPPED
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGKILL)
                process.wait(5)
        self._reap()

    async def stop_async(self, grace: float = 10.0) -> None:
        await asyncio.to_thread(self.stop, grace)

    def exits_by(self, cause: str) -> list[Exit]:
        return [e for e in self.exits if e.cause == cause]


async def wait_until_ready(url: str, supervised: Supervised, within: float) -> float:
    """Poll ``url`` until it answers 200; returns the seconds it took."""
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=1.0, trust_env=False) as http:
        while time.monotonic() - started < within:
            try:
                if (await http.get(url)).status_code == 200:
                    return time.monotonic() - started
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    tail = log_tail(supervised.log_path)
    raise RuntimeError(f"{supervised.name} not ready at {url} within {within:.0f} s; log:\n{tail}")


def log_tail(path: Path, lines: int = 15) -> str:
    if not path.exists():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


async def run_once(argv: Sequence[str], env: Mapping[str, str], within: float) -> None:
    """Run a command to completion (``hookinbox migrate``); raise with its output if it fails."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        env=dict(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), within)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise RuntimeError(f"{' '.join(argv)}: no answer within {within:.0f} s") from None
    except asyncio.CancelledError:
        process.kill()
        await asyncio.shield(process.wait())
        raise
    if process.returncode != 0:
        text = output.decode(errors="replace").strip()[-800:]
        raise RuntimeError(f"{' '.join(argv)} exited {process.returncode}: {text}")


def environment(extra: Mapping[str, str]) -> dict[str, str]:
    """Our environment without anything that would point hookinbox elsewhere."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKINBOX_")}
    env.update(extra)
    return env
