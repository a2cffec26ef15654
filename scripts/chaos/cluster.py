"""A PostgreSQL cluster of our own (Debian's pg_createcluster), never the machine's server.

The cluster is named ``chaos_<pid>_<random>``, listens on 127.0.0.1 only, on a port that no
socket and no other cluster's configuration holds (another cluster may be stopped for a
moment, so a free socket alone is not enough), trusts local and 127.0.0.1 connections, and
is not started at boot. ``drop`` is synchronous and safe to call at any point, even twice:
it runs from the ``finally`` of the whole run.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

PG_ETC = Path("/etc/postgresql")
COMMAND_TIMEOUT = 60.0
CTL = ("pg_ctlcluster", "--skip-systemctl-redirect")
SETTINGS = """# Written by `make chaos`: loopback only, small, and quiet.
listen_addresses = '127.0.0.1'
shared_buffers = '32MB'
max_connections = 100
log_min_messages = 'warning'
"""


class ClusterError(RuntimeError):
    """A pg_* command failed; the message holds its output."""


def installed_version() -> str:
    """The newest PostgreSQL major version installed with Debian's cluster tools."""
    if not PG_ETC.is_dir():
        raise ClusterError("no /etc/postgresql: Debian's postgresql-common is not installed")
    versions = [
        v.name
        for v in PG_ETC.iterdir()
        if v.name.isdigit() and Path(f"/usr/lib/postgresql/{v.name}/bin/postgres").exists()
    ]
    if not versions:
        raise ClusterError("no PostgreSQL server binaries under /usr/lib/postgresql")
    return max(versions, key=int)


def cluster_ports() -> set[int]:
    """Ports configured by every cluster on the machine, running or not."""
    out = subprocess.run(
        ["pg_lsclusters", "--json"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    ports: set[int] = set()
    for cluster in json.loads(out or "[]"):
        port = cluster.get("port") or cluster.get("config", {}).get("port")
        if port:
            ports.add(int(port))
    return ports


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def pick_port(rng: random.Random, taken: set[int]) -> int:
    for _ in range(200):
        port = rng.randrange(20000, 60000)
        if port not in taken and port_is_free(port):
            return port
    raise ClusterError("no free port found for the chaos cluster")


@dataclass
class Cluster:
    """One throw-away cluster; ``create`` then ``start``; ``drop`` always."""

    version: str
    name: str
    port: int
    created: bool = field(default=False, init=False)

    @classmethod
    def plan(cls, rng: random.Random) -> Cluster:
        name = f"chaos_{os.getpid()}_{rng.randrange(16**6):06x}"
        return cls(installed_version(), name, pick_port(rng, cluster_ports()))

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    @property
    def label(self) -> str:
        return f"{self.version}/{self.name} on 127.0.0.1:{self.port}"

    async def create(self) -> None:
        # Marked before the command: a half-made cluster must be dropped too.
        self.created = True
        await _run(
            "pg_createcluster",
            self.version,
            self.name,
            "--port",
            str(self.port),
            "--start-conf=manual",
            "--",
            "--auth-local=trust",
            "--auth-host=trust",
        )
        # Debian's postgresql.conf reads conf.d/ last; pg_createcluster -o mangles quoting.
        (PG_ETC / self.version / self.name / "conf.d" / "chaos.conf").write_text(SETTINGS)

    async def start(self) -> None:
        await self._ctl("start")

    async def stop(self, mode: str = "fast") -> None:
        await self._ctl("stop", "-m", mode)

    async def restart(self, mode: str) -> None:
        await self._ctl("restart", "-m", mode)

    async def _ctl(self, action: str, *options: str) -> None:
        await _run(*CTL, self.version, self.name, action, *options)

    def drop(self) -> str | None:
        """Stop and remove the cluster; returns an error line instead of raising."""
        if not self.created:
            return None
        if not (PG_ETC / self.version / self.name).exists():
            self.created = False
            return None
        drop = ["pg_dropcluster", "--stop", self.version, self.name]
        result = subprocess.run(drop, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        if result.returncode != 0:
            # A server stuck in shutdown: stop it hard, then drop again.
            subprocess.run(
                [*CTL, self.version, self.name, "stop", "-m", "immediate"],
                capture_output=True,
                timeout=COMMAND_TIMEOUT,
            )
            result = subprocess.run(drop, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        if result.returncode != 0:
            return f"could not drop cluster {self.label}: {result.stderr.strip()[-300:]}"
        self.created = False
        return None


async def _run(*argv: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), COMMAND_TIMEOUT)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise ClusterError(f"{' '.join(argv)}: no answer within {COMMAND_TIMEOUT:.0f} s") from None
    except asyncio.CancelledError:
        # Interrupted: let a pg_* command finish (a half-made cluster is harder to drop),
        # so that the clean-up that follows sees a settled cluster.
        await asyncio.shield(asyncio.wait_for(process.wait(), COMMAND_TIMEOUT))
        raise
    if process.returncode != 0:
        tail = output.decode(errors="replace").strip()[-500:]
        raise ClusterError(f"{' '.join(argv)} exited {process.returncode}: {tail}")
