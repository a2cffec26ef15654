"""A PostgreSQL cluster of the bench's own, configured as docs/performance.md's capacity
model tells a deployment to configure its primary (``--pg-cluster sized``).

The machine's PostgreSQL runs Debian's defaults (128 MB of ``shared_buffers``, a
checkpoint at every 1 GB of WAL): a server for a laptop, not the primary of a webhook
journal of 20 million rows, whose dedup key alone is ~950 MB. A figure measured there
says what an untuned server costs; the capacity model claims that a server sized for the
key does not pay it, and this cluster is how that claim is measured rather than asserted.
The settings are pgtune's rules for an OLTP server of this machine's memory (a quarter
of it for ``shared_buffers``, three quarters as ``effective_cache_size``, 2 to 8 GB of WAL
between checkpoints, completion target 0.9, SSD page costs): the configuration a team
would start from, nothing fitted to hookinbox. Everything else (``fsync``,
``synchronous_commit``, autovacuum) stays at PostgreSQL's defaults, as on the machine's
server.

The cluster lives in a temporary directory on a free port of 127.0.0.1, is started with
``pg_ctl`` (as the ``postgres`` user when the bench runs as root: ``initdb`` refuses
root), and is stopped by its own ``postmaster.pid`` and deleted at the end, also when
the run fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness import free_port, log


def _bindir() -> Path:
    """PostgreSQL's server programs: ``pg_config --bindir`` (Debian keeps ``initdb`` off
    the PATH, under /usr/lib/postgresql/N/bin)."""
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0 and (Path(out.stdout.strip()) / "initdb").exists():
            return Path(out.stdout.strip())
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    raise RuntimeError("no PostgreSQL server programs found (pg_config --bindir, initdb)")


def _memory_bytes() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("MemTotal missing from /proc/meminfo")


def sized_settings(memory: int) -> dict[str, str]:
    """pgtune's OLTP rules for a server with ``memory`` bytes (PostgreSQL 15, SSD)."""
    mb = memory // (1024 * 1024)
    return {
        "shared_buffers": f"{mb // 4}MB",
        "effective_cache_size": f"{mb * 3 // 4}MB",
        "maintenance_work_mem": f"{min(mb // 16, 2048)}MB",
        "wal_buffers": "16MB",
        "min_wal_size": "2GB",
        "max_wal_size": "8GB",
        "checkpoint_completion_target": "0.9",
        "random_page_cost": "1.1",
        "effective_io_concurrency": "200",
        "default_statistics_target": "100",
        "max_connections": "200",
    }


class SizedCluster:
    """``with SizedCluster() as base:`` a running cluster; ``base`` is its
    ``postgresql://`` address without a database. ``extra``: settings over the sized
    ones (``--pg-setting``), for an A/B of one of them."""

    def __init__(self, extra: dict[str, str] | None = None) -> None:
        self.settings = {**sized_settings(_memory_bytes()), **(extra or {})}
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="hookinbox-bench-pg-"))
        self.data = self.dir / "data"
        self._bin = _bindir()
        self._as_postgres = os.geteuid() == 0

    @property
    def base(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}"

    def _run(self, *cmd: str) -> None:
        argv = [str(self._bin / cmd[0]), *cmd[1:]]
        if self._as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        out = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
        if out.returncode != 0:
            raise RuntimeError(f"{cmd[0]} failed: {(out.stderr or out.stdout).strip()[-400:]}")

    def __enter__(self) -> str:
        if self._as_postgres:
            shutil.chown(self.dir, "postgres", "postgres")
        try:
            self._run(
                "initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust",
                "-E", "UTF8", "--locale=C.UTF-8", "--no-sync",
            )  # fmt: skip
            options = " ".join(f"-c {k}={v}" for k, v in self.settings.items())
            self._run(
                "pg_ctl", "-D", str(self.data), "-l", str(self.dir / "server.log"), "-w",
                "-t", "120", "-o",
                f"-c port={self.port} -c listen_addresses=127.0.0.1 "
                f"-c unix_socket_directories={self.dir} {options}",
                "start",
            )  # fmt: skip
        except RuntimeError as exc:
            # pg_ctl says only "could not start server": the reason is in the server's log,
            # which goes with the directory.
            server_log = self.dir / "server.log"
            tail = server_log.read_text(errors="replace")[-400:] if server_log.exists() else ""
            self._remove()
            raise RuntimeError(f"{exc}; server log: {tail.strip()}") from None
        except BaseException:
            self._remove()
            raise
        shown = ", ".join(
            f"{k} {self.settings[k]}" for k in ("shared_buffers", "max_wal_size", "min_wal_size")
        )
        log(f"[pg-cluster] sized cluster on 127.0.0.1:{self.port} ({shown}), {self.dir}")
        return self.base

    def __exit__(self, *exc: object) -> None:
        self._remove()

    def _remove(self) -> None:
        if (self.data / "postmaster.pid").exists():
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                log(f"warning: the bench's cluster did not stop: {exc}")
                return  # its files stay for the operator; removing them under it is worse
        shutil.rmtree(self.dir, ignore_errors=True)
