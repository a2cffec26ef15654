"""The Django example, driven over HTTP: the Django site serves its pages and receives
Shopify webhooks under /hooks (one ASGI app under uvicorn); a separate ``hookinbox
worker`` process runs the handler. Both are started here and stopped by their PIDs.

    python examples/django/run.py
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent

#: A demo secret for this example only; a real deployment sets its own.
DEMO_SECRET = "django-example-shopify-demo"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def wait_until(check: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with_result = check()
        if with_result:
            return with_result
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def main(database: str | None = None, say: Callable[[str], None] = print) -> dict[str, Any]:
    from hookinbox.config import load_config
    from hookinbox.testing import signed_request

    with tempfile.TemporaryDirectory(prefix="django-example-") as tmp:
        work = Path(tmp)
        database = database or f"sqlite:///{work / 'hookinbox.db'}"
        config_path = work / "hookinbox.toml"
        text = (HERE / "hookinbox.toml").read_text()
        config_path.write_text(
            text.replace('"sqlite:///var/django-example.db"', json.dumps(database))
        )
        env = dict(os.environ)
        env.setdefault("SHOPIFY_CLIENT_SECRET", DEMO_SECRET)
        env.update(
            HOOKINBOX_CONFIG=str(config_path),
            SHIPMENTS_FILE=str(work / "shipments.jsonl"),
            PYTHONPATH=os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]),
        )
        os.environ["SHOPIFY_CLIENT_SECRET"] = env["SHOPIFY_CLIENT_SECRET"]
        source = load_config(config_path).sources["shopify"]
        port = free_port()
        log = (work / "processes.log").open("ab")
        site = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "asgi:application", "--port", str(port),
             "--host", "127.0.0.1", "--log-level", "warning"],
            cwd=HERE, env=env, stdout=log, stderr=log,
        )  # fmt: skip
        worker = subprocess.Popen(
            [sys.executable, "-m", "hookinbox.cli", "worker", "--config", str(config_path)],
            cwd=HERE, env=env, stdout=log, stderr=log,
        )  # fmt: skip
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:

                def ready() -> bool:
                    try:
                        return client.get("/hooks/readyz").status_code == 200
                    except httpx.TransportError:
                        return False

                wait_until(ready, "the site to start")
                say(f"Django site: GET / -> {client.get('/').json()}")
                order = {"id": 4501, "name": "#1001", "fulfillment_status": "fulfilled"}
                request = signed_request(
                    source, order, event_id="shopify-evt-1", event_type="orders/fulfilled"
                )
                answers = [
                    client.post(
                        "/hooks/webhooks/shopify", content=request.body, headers=request.headers
                    ).json()["status"]
                    for _ in range(2)
                ]
                say(f"orders/fulfilled shopify-evt-1, delivered twice: {', '.join(answers)}")
                shipments = wait_until(
                    lambda: client.get("/shipments/").json()["shipments"], "the shipment"
                )
                time.sleep(0.5)  # nothing more comes
                shipments = client.get("/shipments/").json()["shipments"]
                say(f"the hookinbox worker process handled it: GET /shipments/ -> {shipments}")
        finally:
            stop(worker)
            stop(site)
            log.close()
        say(f"stopped by PID: the site ({site.pid}) and the worker ({worker.pid})")
    return {
        "answers": answers,
        "shipments": shipments,
        "exits": [site.returncode, worker.returncode],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", help="store URL (default: a temporary SQLite file)")
    parser.add_argument("--summary", help="also write what happened as JSON to this file")
    args = parser.parse_args()
    summary = main(args.database)
    if args.summary:
        Path(args.summary).write_text(json.dumps(summary, indent=2))
