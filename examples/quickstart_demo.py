"""``make run``: the quickstart, whole, in one command.

In order: the demo environment (``examples/quickstart.env``: the sources' secrets and
the admin and API tokens, all demo values), the store (``hookinbox migrate --create``),
a forward target on 127.0.0.1:9000 in this process (``/internal/openai`` answers 200,
``/internal/billing`` always 500, so retries and dead letters exist to look at), then
``hookinbox serve`` with the admin and the API on, until Ctrl-C. Once it answers, the
URLs and the demo tokens are printed.

    python examples/quickstart_demo.py [--config PATH] [--target-port N]

``make shell`` opens a shell with the same environment, where the README's commands
work as written; ``make demo`` sends a few deliveries.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType

HERE = Path(__file__).resolve().parent
ENV_FILE = HERE / "quickstart.env"
CONFIG = HERE / "quickstart.toml"
#: The ids the target gives what it takes (a forward's JSON ``id`` is the job's business id).
TASKS = itertools.count(1)


def demo_environment(path: Path = ENV_FILE) -> dict[str, str]:
    """``KEY=value`` lines (the file is also sourced by the Makefile's shell)."""
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            found[key.strip()] = value.strip()
    return found


class Target(BaseHTTPRequestHandler):
    """The internal service the quickstart forwards to: one route that takes each
    forward, one that always fails. It prints the job id (the Idempotency-Key), never
    the body."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = self.headers.get("Idempotency-Key", "-")
        if self.path == "/internal/openai":
            status, body = 200, {"id": f"demo-task-{next(TASKS)}"}
        elif self.path == "/internal/billing":
            status, body = 500, {"error": "demo: this route always fails"}
        else:
            status, body = 404, {"error": "no such route"}
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)
        print(f"demo target: POST {self.path} -> {status} (Idempotency-Key {key})", flush=True)

    def log_message(self, format: str, *args: object) -> None:
        """One line per request is printed by do_POST instead."""


def wait_healthy(url: str, server: subprocess.Popen[bytes], timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=1) as answer:
                if answer.status == 200:
                    return True
        except OSError:
            time.sleep(0.1)
    return False


def banner(config: Path, environ: dict[str, str]) -> str:
    settings = tomllib.loads(config.read_text())["server"]
    base = f"http://{settings['host']}:{settings['port']}"
    return "\n".join(
        [
            "",
            "hookinbox quickstart is running (DEMO: the tokens below are published demo values)",
            f"  webhooks  {base}/webhooks/{{source}}   (sources: examples/quickstart.toml)",
            f"  admin     {base}/admin/   token {environ['HOOKINBOX_ADMIN_TOKEN']}",
            f"  API       {base}/api/v1/  read token {environ['DEMO_READ_TOKEN']}",
            f"                              operate token {environ['DEMO_OPERATE_TOKEN']}",
            f"  metrics   {base}/metrics",
            "In a second terminal: `make demo` sends deliveries; `make shell` opens a shell",
            "where the README's commands (`hookinbox send ...`) work as written. Ctrl-C stops.",
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=CONFIG)
    parser.add_argument("--target-port", type=int, default=9000)
    args = parser.parse_args()
    config = args.config.resolve()
    environ = {**demo_environment(), "HOOKINBOX_CONFIG": str(config)}
    os.environ.update(environ)
    hookinbox = [sys.executable, "-m", "hookinbox.cli"]
    made = subprocess.run([*hookinbox, "migrate", "--create", "--config", str(config)])
    if made.returncode != 0:
        return made.returncode
    target = ThreadingHTTPServer(("127.0.0.1", args.target_port), Target)
    threading.Thread(target=target.serve_forever, daemon=True).start()
    server = subprocess.Popen(
        [*hookinbox, "serve", "--config", str(config), "--log-format", "console"]
    )

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        settings = tomllib.loads(config.read_text())["server"]
        if wait_healthy(f"http://{settings['host']}:{settings['port']}/healthz", server):
            print(banner(config, environ), flush=True)
        return server.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=5)
        target.shutdown()


if __name__ == "__main__":
    sys.exit(main())
