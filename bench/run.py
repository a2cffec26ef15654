"""`make bench`: throughput and latency figures for the receive path.

Starts each target as a subprocess on a free 127.0.0.1 port, drives it with wrk from a
second process (pre-signed Standard Webhooks requests, cycled by bench/cycle.lua), and
prints accepted deliveries/s and p50/p99 answer latency, medians of short runs.

Targets:
  ceiling           bench/bare_app.py: Starlette, reads the body, answers 200
  naive             bench/naive_receiver.py: verify + one asyncpg transaction per request
  hookinbox-sqlite  `hookinbox serve --no-workers` on a SQLite file
  hookinbox-pg      `hookinbox serve --no-workers` on PostgreSQL

Modes: "unique" (every request a new webhook-id) and "dup" (the same few ids, all already
accepted, sent again and again). These are figures, not a test: nothing here fails the build.
See bench/README.md for how to read them.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

BENCH_DIR = Path(__file__).resolve().parent
LUA = BENCH_DIR / "cycle.lua"
PY = Path(sys.executable)
HOOKINBOX = PY.parent / "hookinbox"
HOST = "127.0.0.1"
PATH = "/webhooks/bench"
PG_BASE = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
PG_DB_HOOKINBOX = "hookinbox_bench"
PG_DB_NAIVE = "naive_bench"
ALL_TARGETS = ("ceiling", "naive", "hookinbox-sqlite", "hookinbox-pg", "hookinbox-pg-x2")
#: Measured only when asked for (--targets): two server processes are not the
#: one-process comparison the ratios are about, but show the scale-out path.
DEFAULT_TARGETS = ALL_TARGETS[:4]
HEALTH_TIMEOUT_S = 30.0
CEILING_REQUESTS = 20_000  # the bare app ignores ids: one file, cycled


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- requests


class Signer:
    """Standard Webhooks signer: base64(HMAC-SHA256(key, f"{id}.{ts}.{body}")), "v1," prefix."""

    def __init__(self, secret: str) -> None:
        self.key = base64.b64decode(secret.removeprefix("whsec_"))

    def sign(self, msg_id: str, ts: int, body: bytes) -> str:
        mac = hmac.new(self.key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256)
        return "v1," + base64.b64encode(mac.digest()).decode()


def make_body(msg_id: str, n: int) -> bytes:
    """A small realistic event (~300 bytes), different for every id."""
    return json.dumps(
        {
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
        },
        separators=(",", ":"),
    ).encode()


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


def write_requests(path: Path, port: int, signer: Signer, ids: list[str]) -> None:
    """Write complete raw HTTP requests separated by NUL bytes (read by cycle.lua)."""
    ts = int(time.time())
    with path.open("wb") as f:
        f.write(
            b"\0".join(
                raw_request(port, signer, msg_id, ts, make_body(msg_id, n))
                for n, msg_id in enumerate(ids)
            )
        )


def unique_ids(count: int) -> list[str]:
    tag = secrets.token_hex(4)
    return [f"msg_{tag}_{n:08d}" for n in range(count)]


def dup_ids(count: int, tag: str) -> list[str]:
    return [f"msg_dup_{tag}_{n}" for n in range(count)]


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


# ---------------------------------------------------------------- databases


def pg_dsn(db: str) -> str:
    return f"{PG_BASE}/{db}"


async def _pg_admin(*statements: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(pg_dsn("postgres"), timeout=5)
    try:
        for stmt in statements:
            await conn.execute(stmt)
    finally:
        await conn.close()


def pg_recreate(db: str) -> None:
    asyncio.run(
        _pg_admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)', f'CREATE DATABASE "{db}"')
    )


def pg_drop(db: str) -> None:
    try:
        asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
    except Exception as exc:  # cleanup must not hide the figures
        log(f"warning: could not drop database {db}: {exc}")


# ---------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class Unavailable(Exception):
    pass


class Server:
    """One server subprocess in its own process group; stopped by that pid/pgid only."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], logfile: Path) -> None:
        self.name = name
        self.cmd = cmd
        self.env = env
        self.logfile = logfile
        self.port = int(cmd[cmd.index("--port") + 1])
        self.proc: subprocess.Popen[bytes] | None = None

    def log_tail(self, n: int = 8) -> str:
        try:
            lines = self.logfile.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return "\n".join("    " + ln for ln in lines[-n:])

    def start(self) -> None:
        with self.logfile.open("wb") as out:
            self.proc = subprocess.Popen(
                self.cmd,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=BENCH_DIR.parent,
            )
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

    def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        # The group id is our child's pid (start_new_session): only what we started.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def uvicorn_cmd(app: str, port: int) -> list[str]:
    return [
        str(PY),
        "-m",
        "uvicorn",
        "--app-dir",
        str(BENCH_DIR),
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


HOOKINBOX_CONFIG = """\
database = "{database}"

[sources.bench]
scheme = "standard-webhooks"
secret_env = "BENCH_SECRET"

[[sources.bench.routes]]
events = ["*"]
action = "noop"
handler = "hookinbox.examples:noop"
"""


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


def make_server(target: str, tmp: Path, env: dict[str, str]) -> Server:
    port = free_port()
    logfile = tmp / f"{target}.log"
    if target == "ceiling":
        return Server(target, uvicorn_cmd("bare_app:app", port), env, logfile)
    if target == "naive":
        pg_recreate(PG_DB_NAIVE)
        return Server(
            target,
            uvicorn_cmd("naive_receiver:app", port),
            {**env, "NAIVE_DSN": pg_dsn(PG_DB_NAIVE)},
            logfile,
        )
    help_text = hookinbox_help()
    if target.startswith("hookinbox-pg"):
        pg_recreate(PG_DB_HOOKINBOX)
        database = pg_dsn(PG_DB_HOOKINBOX)
    else:
        database = f"sqlite:///{tmp / 'bench.db'}"
    config = tmp / f"{target}.toml"
    config.write_text(HOOKINBOX_CONFIG.format(database=database))
    if any(ln.strip().startswith("migrate") for ln in help_text.splitlines()):
        proc = subprocess.run(
            [str(HOOKINBOX), "migrate", "--config", str(config)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise Unavailable("`hookinbox migrate` failed:\n" + "\n".join("    " + t for t in tail))
    cmd = [
        str(HOOKINBOX),
        "serve",
        "--config",
        str(config),
        "--host",
        HOST,
        "--port",
        str(port),
        "--no-workers",
    ]
    if target.endswith("-x2"):
        cmd += ["--processes", "2"]
    return Server(target, cmd, env, logfile)


# ---------------------------------------------------------------- the driver


@dataclass
class Cell:
    target: str
    mode: str
    conns: int
    runs: list[RunResult] = field(default_factory=list)

    def med(self, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in self.runs)


@dataclass
class TargetResult:
    target: str
    cells: list[Cell] = field(default_factory=list)
    unavailable: str | None = None
    notes: list[str] = field(default_factory=list)


def prime_dups(port: int, signer: Signer, ids: list[str]) -> int:
    """Send each dup id once so that every request of a dup run is a repeat."""
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


ROW_TABLES = {
    "naive": ("naive_journal", "naive_jobs"),
    "hookinbox-pg": ("deliveries", "jobs"),
    "hookinbox-pg-x2": ("deliveries", "jobs"),
    "hookinbox-sqlite": ("deliveries", "jobs"),
}


async def _pg_counts(db: str, tables: tuple[str, ...]) -> list[int]:
    import asyncpg

    conn = await asyncpg.connect(pg_dsn(db), timeout=5)
    try:
        return [await conn.fetchval(f"SELECT count(*) FROM {t}") for t in tables]
    finally:
        await conn.close()


def check_rows(target: str, tmp: Path, accepted: int, in_flight: int) -> str:
    """After the server stopped: every "accepted" answer must have its journal row and job.

    A few more rows than answers are expected: requests still in flight when wrk stops a
    run may be committed without their answer being counted (at most one per connection).
    """
    tables = ROW_TABLES[target]
    try:
        if target == "hookinbox-sqlite":
            import sqlite3

            with contextlib.closing(sqlite3.connect(tmp / "bench.db")) as db:
                counts = [db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables]
        else:
            db_name = PG_DB_NAIVE if target == "naive" else PG_DB_HOOKINBOX
            counts = asyncio.run(_pg_counts(db_name, tables))
    except Exception as exc:
        return f"row check skipped ({type(exc).__name__}: {exc})"
    ok = all(accepted <= c <= accepted + in_flight for c in counts)
    verdict = "ok" if ok else f"MISMATCH (expected {accepted:,}..{accepted + in_flight:,})"
    rows = ", ".join(f"{t}={c:,}" for t, c in zip(tables, counts, strict=True))
    return f"row check {verdict}: {accepted:,} accepted answers; {rows}"


def bench_target(
    target: str, args: argparse.Namespace, wrk: str, tmp: Path, env: dict[str, str], signer: Signer
) -> TargetResult:
    result = TargetResult(target)
    try:
        server = make_server(target, tmp, env)
        log(f"[{target}] starting: {' '.join(server.cmd)}")
        server.start()
    except Unavailable as exc:
        result.unavailable = str(exc)
        log(f"[{target}] unavailable: {exc}")
        return result
    except Exception as exc:
        result.unavailable = f"{type(exc).__name__}: {exc}"
        log(f"[{target}] unavailable: {result.unavailable}")
        return result
    reqfile = tmp / f"{target}.reqs"
    accepted_total = 0
    in_flight = 0  # requests cut off when wrk stops: written, maybe committed, not counted
    try:
        port = server.port
        modes = ["unique"] if target == "ceiling" else ["unique", "dup"]
        if target == "ceiling":
            write_requests(reqfile, port, signer, unique_ids(CEILING_REQUESTS))
        # Warm-up (not reported): connections, pools, caches; and a rate estimate for sizing
        # the unique-id files so that a run never has to re-send an id.
        rate_hint = 40_000.0
        warm = min(2, args.duration)
        if target != "ceiling":
            write_requests(reqfile, port, signer, unique_ids(int(rate_hint * warm * 1.5) + 1000))
        w = run_wrk(wrk, port, reqfile, max(args.connections), args.threads, warm)
        accepted_total += w.accepted
        in_flight += max(args.connections)
        if target != "ceiling":
            rate_hint = max(w.ok_per_s, 500.0)
        log(f"[{target}] warm-up: {w.ok_per_s:,.0f}/s, errors {w.errors}")
        dup_list = dup_ids(args.dup_ids, secrets.token_hex(3))
        primed = False
        for conns in args.connections:
            for mode in modes:
                cell = Cell(target, mode, conns)
                result.cells.append(cell)
                for i in range(args.runs):
                    if mode == "unique" and target != "ceiling":
                        count = int(rate_hint * args.duration * 1.6) + 2000
                        write_requests(reqfile, port, signer, unique_ids(count))
                    elif mode == "dup":
                        if not primed:
                            accepted_total += prime_dups(port, signer, dup_list)
                            primed = True
                        write_requests(reqfile, port, signer, dup_list)
                    r = run_wrk(wrk, port, reqfile, conns, args.threads, args.duration)
                    if mode == "unique" and target != "ceiling":
                        rate_hint = max(rate_hint, r.requests / r.duration_s)
                    cell.runs.append(r)
                    accepted_total += r.accepted
                    in_flight += conns
                    flag = ""
                    if r.errors:
                        flag += f"  ERRORS non200={r.non200} {r.non200_codes}"
                        flag += f" socket={r.socket_errors}"
                    if mode == "unique" and target != "ceiling" and (r.wraps or r.duplicate):
                        flag += f"  (ids re-sent: {r.duplicate} duplicate answers)"
                    if mode == "dup" and r.accepted:
                        flag += f"  ({r.accepted} accepted in a dup run)"
                    log(
                        f"[{target}] {mode:6} c={conns:<3} run {i + 1}/{args.runs}: "
                        f"{r.ok_per_s:8,.0f}/s  p50 {r.p50_ms:6.2f} ms  "
                        f"p99 {r.p99_ms:6.2f} ms{flag}"
                    )
    except Exception as exc:
        result.notes.append(f"aborted: {type(exc).__name__}: {exc}")
        log(f"[{target}] aborted: {exc}\n{server.log_tail()}")
    finally:
        server.stop()
        reqfile.unlink(missing_ok=True)
        if server.proc is not None and server.proc.returncode not in (0, None, -15):
            result.notes.append(f"server exited with code {server.proc.returncode}")
    if target != "ceiling" and result.cells:
        result.notes.append(check_rows(target, tmp, accepted_total, in_flight))
    return result


# ---------------------------------------------------------------- report


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def find(results: dict[str, TargetResult], target: str, mode: str, conns: int) -> Cell | None:
    tr = results.get(target)
    if tr is None:
        return None
    for c in tr.cells:
        if c.mode == mode and c.conns == conns and c.runs:
            return c
    return None


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


def report(results: dict[str, TargetResult], args: argparse.Namespace, busy: float | None) -> None:
    print()
    print(
        f"hookinbox bench: {args.runs} runs x {args.duration} s per cell, medians; "
        f"wrk -t{args.threads}, 127.0.0.1, {os.cpu_count()} CPUs shared by load and server"
    )
    print(
        "200/s = answers with HTTP 200 per second (accepted + duplicate); "
        "latency = wrk, request write to answer"
    )
    if busy is not None:
        print(f"CPU already busy before the bench started: {busy:.0%}", end="")
        print(
            " -- WARNING: other load on the machine, figures are low and noisy"
            if busy > 0.15
            else ""
        )
    print()
    hdr = (
        f"{'target':<17} {'mode':<6} {'conns':>5} {'200/s':>9} {'p50 ms':>7} "
        f"{'p99 ms':>7}  {'errors':>6}  runs (200/s)"
    )
    print(hdr)
    print("-" * len(hdr))
    for target, tr in results.items():
        if tr.unavailable is not None:
            lines = [ln.strip() for ln in tr.unavailable.splitlines() if ln.strip()]
            reason = lines[0] + (f" ... {lines[-1]}" if len(lines) > 1 else "")
            print(f"{target:<17} unavailable: {reason}")
            continue
        for c in tr.cells:
            if not c.runs:
                continue
            errors = sum(r.errors for r in c.runs)
            each = " ".join(f"{r.ok_per_s / 1000:.1f}k" for r in c.runs)
            print(
                f"{target:<17} {c.mode:<6} {c.conns:>5} {fmt_rate(c.med('ok_per_s')):>9} "
                f"{c.med('p50_ms'):>7.2f} {c.med('p99_ms'):>7.2f}  "
                f"{errors:>6}  {each}"
            )
        for note in tr.notes:
            print(f"{'':<17} note: {note}")
    errors_total = sum(r.errors for tr in results.values() for c in tr.cells for r in c.runs)
    if errors_total:
        print(
            f"\nWARNING: {errors_total} non-200 answers or socket errors; "
            "figures of runs with errors are not clean (see the per-run log above)."
        )

    print("\nratios (median 200/s, unique ids unless noted):")
    ratios = [
        ("hookinbox-pg", "ceiling", "unique", 0.60, "of ceiling"),
        ("hookinbox-pg", "naive", "unique", 3.0, "x naive"),
        ("hookinbox-sqlite", "ceiling", "unique", 0.50, "of ceiling"),
        ("hookinbox-pg", "naive", "dup", None, "x naive"),
        ("hookinbox-pg", "ceiling", "dup", None, "of ceiling"),
        ("hookinbox-sqlite", "ceiling", "dup", None, "of ceiling"),
    ]
    for conns in args.connections:
        for num, den, mode, aim, unit in ratios:
            if aim is None and conns != max(args.connections):
                continue
            a = find(results, num, mode, conns)
            b = find(results, den, "unique" if den == "ceiling" else mode, conns)
            label = f"  {num} {mode} / {den} @{conns}c"
            if a is None or b is None:
                missing = num if a is None else den
                print(f"{label:<46} n/a ({missing} not measured)")
                continue
            ratio = a.med("ok_per_s") / b.med("ok_per_s")
            value = f"{ratio:.2f} {unit}" if unit.startswith("of") else f"{ratio:.2f}{unit}"
            if aim is None:
                verdict = ""
            else:
                goal = f"{aim:.0%}" if unit.startswith("of") else f"{aim:g}x"
                verdict = f"aim >= {goal}: {'met' if ratio >= aim else 'NOT met'}"
            print(f"{label:<46} {value:<16} {verdict}")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--targets",
        default=",".join(DEFAULT_TARGETS),
        help=f"comma-separated subset of {','.join(ALL_TARGETS)}",
    )
    ap.add_argument("--duration", type=int, default=4, help="whole seconds per run (4)")
    ap.add_argument("--runs", type=int, default=3, help="runs per cell, median quoted (3)")
    ap.add_argument("--connections", default="32,8", help="connection counts (32,8)")
    ap.add_argument("--threads", type=int, default=1, help="wrk threads (1)")
    ap.add_argument("--dup-ids", type=int, default=8, help="distinct ids in dup runs (8)")
    ap.add_argument("--json", type=Path, help="also write the raw per-run results here")
    args = ap.parse_args()
    args.connections = [int(c) for c in args.connections.split(",") if c]
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = set(targets) - set(ALL_TARGETS)
    if unknown:
        ap.error(f"unknown targets: {', '.join(sorted(unknown))}")

    wrk = ensure_wrk()
    busy = cpu_busy()
    if busy is not None and busy > 0.15:
        log(
            f"warning: CPU {busy:.0%} busy before starting (other processes); figures will be noisy"
        )
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    signer = Signer(secret)
    env = {**os.environ, "BENCH_SECRET": secret, "PYTHONUNBUFFERED": "1"}
    tmp = Path(tempfile.mkdtemp(prefix="hookinbox-bench-"))
    started = time.monotonic()
    results: dict[str, TargetResult] = {}
    try:
        for target in targets:
            results[target] = bench_target(target, args, wrk, tmp, env, signer)
    finally:
        if "naive" in targets:
            pg_drop(PG_DB_NAIVE)
        if any(t.startswith("hookinbox-pg") for t in targets):
            pg_drop(PG_DB_HOOKINBOX)
        shutil.rmtree(tmp, ignore_errors=True)
    report(results, args, busy)
    print(f"\n(total {time.monotonic() - started:.0f} s)")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    t: {
                        "unavailable": tr.unavailable,
                        "notes": tr.notes,
                        "cells": [
                            {
                                "mode": c.mode,
                                "conns": c.conns,
                                "runs": [r.__dict__ | {"ok_per_s": r.ok_per_s} for r in c.runs],
                            }
                            for c in tr.cells
                        ],
                    }
                    for t, tr in results.items()
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
