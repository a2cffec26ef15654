"""What every bench mode shares: signed requests, wrk, server processes, databases, CPU.

Nothing here imports hookinbox: the bench drives it through its command line and reads
its tables with SQL, like an operator would.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import concurrent.futures
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

BENCH_DIR = Path(__file__).resolve().parent
PEERS_DIR = BENCH_DIR / "peers"
LUA = BENCH_DIR / "cycle.lua"
PY = Path(sys.executable)
HOOKINBOX = PY.parent / "hookinbox"
HOST = "127.0.0.1"
PATH = "/webhooks/bench"
PG_BASE = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
#: ``[server]`` settings of every hookinbox target's config (``run.py --server-setting``),
#: as TOML values: for an A/B of one of them.
SERVER_SETTINGS: dict[str, str] = {}
HEALTH_TIMEOUT_S = 30.0
#: Every database this bench run creates is named bench_<RUN_TAG>_<role>, so two bench
#: runs (or a bench and a test suite) on one server never touch each other's data.
RUN_TAG = secrets.token_hex(3)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Signer:
    """Standard Webhooks signer: base64(HMAC-SHA256(key, f"{id}.{ts}.{body}")), "v1," prefix."""

    key: bytes

    @classmethod
    def from_secret(cls, secret: str) -> Signer:
        return cls(base64.b64decode(secret.removeprefix("whsec_")))

    def sign(self, msg_id: str, ts: int, body: bytes) -> str:
        mac = hmac.new(self.key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256)
        return "v1," + base64.b64encode(mac.digest()).decode()


@dataclass
class Bench:
    """One bench run: its options, wrk, a temp dir, the servers' environment, the signer."""

    args: argparse.Namespace
    wrk: str
    tmp: Path
    env: dict[str, str]
    signer: Signer


# ---------------------------------------------------------------- requests


#: The size bodies are grown to (``--body-bytes``), by invoice lines; 0: the small event.
#: A provider's event with its object is often 2-10 kB, and what a body costs the store
#: (PostgreSQL's JSON parameter, TOAST compression above ~2 kB) grows with it.
_body_bytes = 0


def set_body_bytes(size: int) -> None:
    global _body_bytes
    _body_bytes = max(0, size)


def make_body(msg_id: str, n: int) -> bytes:
    """A small realistic event (~300 bytes), different for every id; with ``--body-bytes``,
    as many more invoice lines (each different) as reach that size."""
    event = {
        "type": "invoice.paid",
        "timestamp": "2025-01-01T00:00:00Z",
        "data": {
            "id": f"inv_{msg_id}",
            "object": "invoice",
            "amount_paid": 1000 + n % 9000,
            "currency": "usd",
            "customer": f"cus_{n % 1000:06d}",
            "lines": [{"price": "price_basic", "quantity": 1 + n % 3}],
            "metadata": {"order": f"ord_{n:09d}", "tenant": "t_bench"},
        },
    }
    body = json.dumps(event, separators=(",", ":")).encode()
    if len(body) < _body_bytes:
        lines = [_invoice_line(msg_id, n, k) for k in range(_lines_for(len(body)))]
        event["data"]["lines"] += lines  # type: ignore[index]
        body = json.dumps(event, separators=(",", ":")).encode()
    return body


def _invoice_line(msg_id: str, n: int, k: int) -> dict[str, object]:
    return {
        "id": f"il_{msg_id}_{k}",
        "price": f"price_{(n * 31 + k * 7) % 977:04d}",
        "quantity": 1 + (n + k) % 5,
        "amount": 100 + (n * 13 + k * 101) % 9000,
        "description": f"Seat {k} of plan {(n + k) % 12}, period {n % 28 + 1}",
    }


def _lines_for(size: int) -> int:
    """How many invoice lines take a body of ``size`` bytes to ``--body-bytes``."""
    one = len(json.dumps(_invoice_line("msg_x" * 4, 0, 0), separators=(",", ":"))) + 1
    return (_body_bytes - size) // one + 1


def raw_request(port: int, signer: Signer, msg_id: str, ts: int, body: bytes) -> bytes:
    head = (
        f"POST {PATH} HTTP/1.1\r\n"
        f"Host: {HOST}:{port}\r\n"
        "Content-Type: application/json\r\n"
        "User-Agent: hookinbox-bench\r\n"
        f"webhook-id: {msg_id}\r\n"
        f"webhook-timestamp: {ts}\r\n"
        f"webhook-signature: {signer.sign(msg_id, ts, body)}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "\r\n"
    )
    return head.encode() + body


def signed_requests(port: int, signer: Signer, ids: list[str]) -> list[bytes]:
    """Complete raw HTTP requests, one per id, signed now (tolerance is 300 s)."""
    ts = int(time.time())
    return [
        raw_request(port, signer, msg_id, ts, make_body(msg_id, n)) for n, msg_id in enumerate(ids)
    ]


def write_requests(path: Path, port: int, signer: Signer, ids: list[str]) -> None:
    """Write complete raw HTTP requests separated by NUL bytes (read by cycle.lua)."""
    path.write_bytes(b"\0".join(signed_requests(port, signer, ids)))


def new_tag() -> str:
    return secrets.token_hex(4)


def unique_ids(count: int, tag: str | None = None) -> list[str]:
    """Fresh ids ``msg_<tag>_<n>``: a run's deliveries are found again by that prefix."""
    tag = tag or new_tag()
    return [f"msg_{tag}_{n:08d}" for n in range(count)]


def tag_pattern(tag: str) -> str:
    """A LIKE pattern for the ids of ``unique_ids(_, tag)``."""
    return f"msg\\_{tag}\\_%"


def dup_ids(count: int, tag: str) -> list[str]:
    return [f"msg_dup_{tag}_{n}" for n in range(count)]


def prime(port: int, signer: Signer, ids: list[str]) -> int:
    """Send each id once (sequentially, with httpx); return how many were accepted."""
    ts = int(time.time())
    accepted = 0
    with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=10) as client:
        for n, msg_id in enumerate(ids):
            body = make_body(msg_id, n)
            r = client.post(
                PATH,
                content=body,
                headers={
                    "content-type": "application/json",
                    "webhook-id": msg_id,
                    "webhook-timestamp": str(ts),
                    "webhook-signature": signer.sign(msg_id, ts, body),
                },
            )
            if r.status_code != 200:
                raise RuntimeError(f"priming {msg_id}: HTTP {r.status_code} {r.text[:200]}")
            accepted += '"accepted"' in r.text
    return accepted


# ---------------------------------------------------------------- wrk


def ensure_wrk() -> str:
    found = shutil.which("wrk")
    if found:
        return found
    log("wrk not found: apt-get install -y wrk")
    cmd = ["apt-get", "install", "-y", "-q", "wrk"]
    if subprocess.run(cmd, capture_output=True).returncode != 0:
        log("install failed, running apt-get update first")
        subprocess.run(["apt-get", "update", "-q"], capture_output=True)
        subprocess.run(cmd, capture_output=True)
    found = shutil.which("wrk")
    if not found:
        sys.exit("bench: wrk is required (apt-get install -y wrk) and could not be installed")
    return found


@dataclass
class RunResult:
    duration_s: float
    requests: int
    accepted: int
    duplicate: int
    ok_other: int
    non200: int
    non200_codes: list[dict[str, int]]
    socket_errors: int
    wraps: int
    p50_ms: float
    p99_ms: float
    #: Server CPU (user + system, its whole process group) spent during the run, per
    #: answered request; None where it could not be read.
    cpu_us_per_req: float | None = None
    #: PostgreSQL CPU (the backends of the target's database, DbBackendCpu) per answered
    #: request; None for a target without a PostgreSQL database of its own.
    pg_cpu_us_per_req: float | None = None
    #: Full-page images and bytes the PostgreSQL cluster wrote to its WAL during the run,
    #: per answered request (pg_wal_counters); None where the mode does not read them.
    wal_fpi_per_req: float | None = None
    wal_bytes_per_req: float | None = None
    #: Where the server says its answers waited during the run (bench/waits.py); None
    #: for a target that does not time them.
    waits: dict[str, float] | None = None

    @property
    def ok_per_s(self) -> float:
        return (self.accepted + self.duplicate + self.ok_other) / self.duration_s

    @property
    def errors(self) -> int:
        return self.non200 + self.socket_errors


def run_wrk(
    wrk: str, port: int, reqfile: Path, conns: int, threads: int, seconds: int
) -> RunResult:
    threads = max(1, min(threads, conns))
    cmd = [
        wrk,
        f"-t{threads}",
        f"-c{conns}",
        f"-d{seconds}s",
        "--timeout",
        "10s",
        "-s",
        str(LUA),
        f"http://{HOST}:{port}{PATH}",
        "--",
        str(reqfile),
        str(threads),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("BENCHJSON ")), None)
    if proc.returncode != 0 or line is None:
        out = (proc.stderr + proc.stdout).strip()[-500:]
        raise RuntimeError(f"wrk failed ({proc.returncode}): {out}")
    d = json.loads(line.removeprefix("BENCHJSON "))
    return RunResult(
        duration_s=d["duration_us"] / 1e6,
        requests=d["requests"],
        accepted=d["accepted"],
        duplicate=d["duplicate"],
        ok_other=d["ok_other"],
        non200=d["non200"],
        non200_codes=d["non200_codes"],
        socket_errors=d["err_connect"] + d["err_read"] + d["err_write"] + d["err_timeout"],
        wraps=d["wraps"],
        p50_ms=d["p50_us"] / 1000,
        p99_ms=d["p99_us"] / 1000,
    )


def settle_disk() -> None:
    """Write out what waits to be written before a measured run: the request files the
    bench writes between runs, and a SQLite target's file, would otherwise be flushed by
    the kernel during a later run, where the writeback stretches that run's commits and
    its client's latencies (docs/performance.md, "The eighteenth sitting"). Each run
    then carries only its own target's writes."""
    os.sync()


def run_wrk_measured(
    wrk: str, server: Proc, reqfile: Path, conns: int, threads: int, seconds: int
) -> RunResult:
    """``run_wrk``, the server's CPU per answered request over the run and, for a server
    with a PostgreSQL database of its own (``server.pg_db``), its backends' CPU."""
    settle_disk()
    pg = DbBackendCpu(server.pg_db, interval=0.5) if server.pg_db else None
    cpu0 = server.cpu_seconds()
    if pg is not None:
        pg.start()
    r = run_wrk(wrk, server.port, reqfile, conns, threads, seconds)
    pg_s = pg.stop() if pg is not None else None
    cpu1 = server.cpu_seconds()
    answered = r.accepted + r.duplicate + r.ok_other + r.non200
    if cpu0 is not None and cpu1 is not None and answered:
        r.cpu_us_per_req = (cpu1 - cpu0) / answered * 1e6
    if pg_s is not None and answered:
        r.pg_cpu_us_per_req = pg_s / answered * 1e6
    return r


# ---------------------------------------------------------------- databases


def pg_dsn(db: str) -> str:
    return f"{PG_BASE}/{db}"


def db_name(role: str) -> str:
    return f"bench_{RUN_TAG}_{role}"


_created: set[str] = set()


async def _pg_admin(*statements: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(pg_dsn("postgres"), timeout=5)
    try:
        for stmt in statements:
            await conn.execute(stmt)
    finally:
        await conn.close()


def _run_admin(*statements: str) -> None:
    """Run admin statements to completion, also when called from inside an event loop
    (then on a thread of its own: set-up steps are sequential anyway)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(_pg_admin(*statements))
        return
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, _pg_admin(*statements)).result()


async def _pg_wal() -> tuple[int, int]:
    import asyncpg

    conn = await asyncpg.connect(pg_dsn("postgres"), timeout=5)
    try:
        row = await conn.fetchrow("SELECT wal_fpi, wal_bytes FROM pg_stat_wal")
    finally:
        await conn.close()
    return int(row["wal_fpi"]), int(row["wal_bytes"])


def pg_wal_counters() -> tuple[int, int]:
    """(full-page images, bytes) the PostgreSQL cluster has written to its WAL so far
    (``pg_stat_wal``). Cluster-wide: read around a run that no other writer shares. A
    page's first change after a checkpoint writes the whole page: an insert into a random
    leaf of a large index costs ~8 kB of WAL where an append costs its row."""
    return asyncio.run(_pg_wal())


async def _pg_scalar(db: str, query: str) -> object:
    import asyncpg

    conn = await asyncpg.connect(pg_dsn(db), timeout=5)
    try:
        return await conn.fetchval(query)
    finally:
        await conn.close()


def pg_scalar(db: str, query: str) -> object:
    """One value from ``query`` in database ``db``, on a connection of its own."""
    return asyncio.run(_pg_scalar(db, query))


def pg_recreate(db: str) -> None:
    _created.add(db)
    _run_admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)', f'CREATE DATABASE "{db}"')


def pg_drop(db: str) -> None:
    try:
        _run_admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        _created.discard(db)
    except Exception as exc:  # cleanup must not hide the figures
        log(f"warning: could not drop database {db}: {exc}")


def pg_drop_all() -> None:
    """Drop every database this run created (called once, at the end)."""
    for db in sorted(_created):
        pg_drop(db)


# ---------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class Unavailable(Exception):
    pass


_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _process_times() -> Iterator[tuple[bytes, int, int]]:
    """(command name, process group, user + system clock ticks) of each live process."""
    try:
        entries = list(os.scandir("/proc"))
    except OSError:
        return
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        name = data[data.index(b"(") + 1 : data.rindex(b")")]
        fields = data[data.rindex(b")") + 2 :].split()
        # fields[0] is /proc/PID/stat field 3 (state): pgrp is 5, utime 14, stime 15.
        yield name, int(fields[2]), int(fields[11]) + int(fields[12])


def pid_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (0.0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return 0.0
    fields = data[data.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def group_cpu_seconds(pgid: int) -> float | None:
    """User + system CPU seconds of the live processes in process group ``pgid``."""
    ticks = [t for _, group, t in _process_times() if group == pgid]
    return sum(ticks) / _CLK_TCK if ticks else None


def postgres_cpu_seconds() -> float:
    """User + system CPU seconds of the live PostgreSQL server processes on this machine
    (``postgres``: backends, checkpointer, WAL writer ...): what the database spends, to
    set beside a client's own CPU."""
    return server_cpu_seconds((b"postgres",))


def server_cpu_seconds(names: tuple[bytes, ...]) -> float:
    """User + system CPU seconds of the live processes named ``names`` (a store's server:
    ``postgres``; RabbitMQ's Erlang VM, ``beam.smp``)."""
    return sum(t for name, _, t in _process_times() if name in names) / _CLK_TCK


def _db_backend_ns(db: str) -> dict[tuple[int, int], int]:
    """{(pid, start time): nanoseconds on a CPU} of the PostgreSQL processes serving
    database ``db``: its client backends and autovacuum workers, whose process titles
    (``postgres: 15/main: postgres <db> 127.0.0.1(port) idle``) name it. The WAL writer,
    checkpointer and other databases' backends are left out: another bench's load on the
    same server is not this database's cost. The time is the scheduler's own count
    (/proc/PID/schedstat, exact), not the 10 ms ticks of /proc/PID/stat."""
    found: dict[tuple[int, int], int] = {}
    needle = db.encode()
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return found
    for pid in entries:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                data = f.read()
            if data[data.index(b"(") + 1 : data.rindex(b")")] != b"postgres":
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                title = f.read().split(b"\0", 1)[0]
            if needle not in title.split():
                continue
            with open(f"/proc/{pid}/schedstat", "rb") as f:
                ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        # stat field 22 (starttime): a reused pid is another key.
        fields = data[data.rindex(b")") + 2 :].split()
        found[(int(pid), int(fields[19]))] = ns
    return found


class DbBackendCpu:
    """CPU seconds the PostgreSQL backends of one database spend between ``start`` and
    ``stop``, with backends that come and go: a thread reads them every ``interval``
    seconds, so a backend that exits (pgbench's, at its end) loses at most its last
    interval. Connections held open across the span (a server's pool) count exactly."""

    def __init__(self, db: str, interval: float = 0.05) -> None:
        self.db = db
        self.interval = interval
        self._base: dict[tuple[int, int], int] = {}
        self._last: dict[tuple[int, int], int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._base = _db_backend_ns(self.db)
        self._last = dict(self._base)
        self._stop.clear()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self._last.update(_db_backend_ns(self.db))

    def stop(self) -> float:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._last.update(_db_backend_ns(self.db))
        ns = sum(t - self._base.get(key, 0) for key, t in self._last.items())
        return ns / 1e9


class Proc:
    """One subprocess in its own process group; stopped by that pid/pgid only.

    A ``--port`` in the command makes it a server: ``start`` then waits for /healthz.
    """

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], logfile: Path) -> None:
        self.name = name
        self.cmd = cmd
        self.env = env
        self.logfile = logfile
        self.port = int(cmd[cmd.index("--port") + 1]) if "--port" in cmd else 0
        self.proc: subprocess.Popen[bytes] | None = None
        #: The PostgreSQL database the server writes to, if it has one of its own: its
        #: backends' CPU is measured beside the server's (run_wrk_measured).
        self.pg_db: str | None = None

    def log_tail(self, n: int = 8) -> str:
        try:
            lines = self.logfile.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return "\n".join("    " + ln[:300] for ln in lines[-n:])

    def spawn(self) -> None:
        with self.logfile.open("ab") as out:
            self.proc = subprocess.Popen(
                self.cmd,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=BENCH_DIR.parent,
            )

    def start(self) -> None:
        self.spawn()
        if not self.port:
            return
        assert self.proc is not None
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        url = f"http://{HOST}:{self.port}/healthz"
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise Unavailable(
                        f"exited with code {self.proc.returncode} before /healthz answered\n"
                        + self.log_tail()
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(url).status_code == 200:
                        return
                time.sleep(0.1)
        self.stop()
        raise Unavailable(
            f"/healthz did not answer 200 within {HEALTH_TIMEOUT_S:.0f}s\n" + self.log_tail()
        )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cpu_seconds(self) -> float | None:
        if self.proc is None:
            return None
        return group_cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        # The group id is our child's pid (start_new_session): only what we started.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)

    def bad_exit(self) -> str | None:
        """A note when the process ended with anything but a clean stop."""
        if self.proc is not None and self.proc.returncode not in (0, None, -15):
            return f"{self.name} exited with code {self.proc.returncode}"
        return None


def uvicorn_cmd(app: str, port: int, app_dir: Path = BENCH_DIR) -> list[str]:
    return [
        str(PY),
        "-m",
        "uvicorn",
        "--app-dir",
        str(app_dir),
        app,
        "--host",
        HOST,
        "--port",
        str(port),
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--no-access-log",
        "--log-level",
        "warning",
    ]


def run_checked(cmd: list[str], env: dict[str, str], what: str, timeout: float = 120) -> None:
    """Run a set-up command (migrate, schema install); Unavailable with its tail on failure."""
    try:
        proc = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=BENCH_DIR.parent
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"{what} failed: {exc}") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise Unavailable(f"{what} failed:\n" + "\n".join("    " + t for t in tail))


# ---------------------------------------------------------------- hookinbox


HOOKINBOX_CONFIG = """\
database = "{database}"

[worker]
concurrency = {concurrency}

[sources.bench]
scheme = "standard-webhooks"
secret_env = "BENCH_SECRET"

[[sources.bench.routes]]
events = ["*"]
action = "noop"
handler = "hookinbox.examples:noop"
"""


@dataclass(frozen=True)
class HookinboxStore:
    """Where a hookinbox target keeps its data: a SQLite file or a PostgreSQL database."""

    kind: str  # "sqlite" | "pg"
    sqlite_path: Path | None = None
    pg_db: str | None = None

    @property
    def url(self) -> str:
        if self.kind == "sqlite":
            return f"sqlite:///{self.sqlite_path}"
        assert self.pg_db is not None
        return pg_dsn(self.pg_db)


def hookinbox_help() -> str:
    if not HOOKINBOX.exists():
        raise Unavailable(f"{HOOKINBOX} does not exist (package not installed in the venv?)")
    try:
        proc = subprocess.run(
            [str(HOOKINBOX), "--help"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"`hookinbox --help` failed: {exc}") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise Unavailable("`hookinbox --help` failed:\n" + "\n".join("    " + t for t in tail))
    return proc.stdout


def fresh_hookinbox_store(kind: str, role: str, tmp: Path) -> HookinboxStore:
    """A new, empty store for one target (a recreated database or a new file)."""
    if kind == "pg":
        db = db_name(role)
        pg_recreate(db)
        return HookinboxStore("pg", pg_db=db)
    path = tmp / f"{role}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return HookinboxStore("sqlite", sqlite_path=path)


#: A target whose name ends so seals its bodies at rest (``[encryption]``; the run's
#: environment holds a key ring whether a target seals or not).
SEALED_SUFFIX = "-sealed"
SEALED_CONFIG = '\n[encryption]\nenabled = true\nkeys_env = "HOOKINBOX_ENCRYPTION_KEYS"\n'


def store_kind_of(target: str) -> str:
    """``sqlite`` or ``pg``, from a hookinbox target's name (``hookinbox-pg-sealed``)."""
    return "sqlite" if target.startswith("hookinbox-sqlite") else "pg"


#: What makes the bench's route an ordered one (docs/concepts/ordering.md): make_body's
#: 1,000 customers are its keys, so a drain of 10,000 jobs holds 10 per key.
ORDERED_ROUTE = 'order_key = "/data/customer"\n'


def hookinbox_config(
    store: HookinboxStore,
    tmp: Path,
    name: str,
    env: dict[str, str],
    concurrency: int,
    *,
    sealed: bool = False,
    ordered: bool = False,
) -> Path:
    """Write the target's config and migrate its store; return the config path.
    ``ordered``: the route runs the jobs of one customer one at a time; ``sealed``: bodies
    and snippets sealed at rest."""
    help_text = hookinbox_help()
    config = tmp / f"{name}.toml"
    text = HOOKINBOX_CONFIG.format(database=store.url, concurrency=concurrency)
    # The route's key first (the config ends in the route's table), then a table of its own.
    server = "".join(f"{name} = {value}\n" for name, value in SERVER_SETTINGS.items())
    config.write_text(
        text
        + (ORDERED_ROUTE if ordered else "")
        + (SEALED_CONFIG if sealed else "")
        + (f"\n[server]\n{server}" if server else "")
    )
    if any(ln.strip().startswith("migrate") for ln in help_text.splitlines()):
        run_checked(
            [str(HOOKINBOX), "migrate", "--config", str(config)], env, "`hookinbox migrate`"
        )
    return config


def hookinbox_serve_cmd(
    config: Path, port: int, *, workers: bool, log_level: str, processes: int = 1
) -> list[str]:
    cmd = [
        str(HOOKINBOX),
        "serve",
        "--config",
        str(config),
        "--host",
        HOST,
        "--port",
        str(port),
        "--log-level",
        log_level,
    ]
    if not workers:
        cmd.append("--no-workers")
    if processes > 1:
        cmd += ["--processes", str(processes)]
    return cmd


# ---------------------------------------------------------------- the machine


def hookinbox_worker_cmd(config: Path, log_level: str) -> list[str]:
    return [str(HOOKINBOX), "worker", "--config", str(config), "--log-level", log_level]


def cpu_busy(seconds: float = 1.0) -> float | None:
    """Fraction of all CPUs busy over `seconds` (before any server starts: other load)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    total = total1 - total0
    return 1 - (idle1 - idle0) / total if total > 0 else None
