"""The first scenario, end to end: an OpenAI ``response.completed`` webhook delivered twice
creates exactly one CRM task, and a worker killed between the CRM call and the record
does not make a second one.

    python examples/crm/run.py                       # on a temporary SQLite file
    python examples/crm/run.py --database postgresql://127.0.0.1/test

What runs: the fake CRM (fake_crm.py) and the inbox's receiver in this process, each on
its own port; the workers are real ``hookinbox worker`` processes (as in production,
apart from the web app), one of which dies on purpose.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import uvicorn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from crm_handlers import CRASH_AFTER_CREATE  # noqa: E402
from fake_crm import FakeCrm  # noqa: E402

from hookinbox import Inbox, load_config  # noqa: E402
from hookinbox.logs import configure_logging  # noqa: E402
from hookinbox.store import Store  # noqa: E402
from hookinbox.testing import signed_request  # noqa: E402

#: A demo secret for this example only; a real deployment sets its own.
DEMO_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """``app`` under uvicorn on a free local port, in this event loop."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(15):
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        async with asyncio.timeout(20):
            await task


class Workers:
    """``hookinbox worker`` processes, each started and stopped by its PID."""

    def __init__(self, config_path: Path, env: dict[str, str], logs: Path) -> None:
        self.config_path, self.env, self.logs = config_path, env, logs
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, **extra_env: str) -> subprocess.Popen[bytes]:
        log = (self.logs / f"worker-{len(self.started) + 1}.log").open("ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "hookinbox.cli", "worker", "--config", str(self.config_path)],
            env={**self.env, **extra_env},
            stdout=log,
            stderr=log,
        )
        self.started.append(proc)
        return proc

    @staticmethod
    def stop(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def stop_all(self) -> None:
        for proc in self.started:
            self.stop(proc)


async def wait_for(check: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = await check()
        if result:
            return result
        await asyncio.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


async def job_of(store: Store, event_id: str) -> Any:
    found = await store.journal.get_delivery(event_id)
    return found.jobs[0] if found is not None and found.jobs else None


async def completed(store: Store, event_id: str) -> Any:
    job = await job_of(store, event_id)
    return job if job is not None and job.state == "completed" else None


def response_completed(event_id: str, response_id: str) -> dict[str, Any]:
    return {
        "object": "event",
        "id": event_id,
        "type": "response.completed",
        "created_at": int(time.time()),
        "data": {"id": response_id},
    }


async def main(database: str | None = None, say: Callable[[str], None] = print) -> dict[str, Any]:
    os.environ.setdefault("OPENAI_WEBHOOK_SECRET", DEMO_SECRET)
    with tempfile.TemporaryDirectory(prefix="crm-example-") as tmp:
        work = Path(tmp)
        database = database or f"sqlite:///{work / 'hookinbox.db'}"
        # The example's config, on the store asked for (workers read it from a file).
        text = (HERE / "hookinbox.toml").read_text()
        text = text.replace('"sqlite:///var/crm-example.db"', json.dumps(database))
        config_path = work / "hookinbox.toml"
        config_path.write_text(text)
        config = load_config(config_path)
        crm = FakeCrm()
        async with serving(crm.app) as crm_url:
            env = dict(os.environ, CRM_URL=crm_url)
            env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
            workers = Workers(config_path, env, work)
            inbox = Inbox(config, run_workers=False)  # the web app receives; workers work
            try:
                async with serving(inbox.app) as inbox_url:
                    return await scenario(inbox, inbox_url, crm, workers, say, database)
            finally:
                workers.stop_all()


async def scenario(
    inbox: Inbox,
    inbox_url: str,
    crm: FakeCrm,
    workers: Workers,
    say: Callable[[str], None],
    database: str,
) -> dict[str, Any]:
    store = inbox.store
    source = inbox.config.sources["openai"]
    url = f"{inbox_url}/webhooks/openai"
    say(f"store: {database.split('?')[0]}")
    async with httpx.AsyncClient(timeout=30) as client:

        async def post(event: dict[str, Any]) -> str:
            request = signed_request(source, event)
            answer = await client.post(url, content=request.body, headers=request.headers)
            return str(answer.json().get("status") or answer.json())

        # 1. The same event delivered twice at once: one reservation wins.
        event_1 = response_completed("evt_crm_1", "resp_1")
        answers = await asyncio.gather(post(event_1), post(event_1))
        say(f"1. response.completed evt_crm_1 delivered twice at once: {', '.join(answers)}")
        first = workers.start()
        job_1 = await wait_for(lambda: completed(store, "evt_crm_1"), "evt_crm_1 to complete")
        say(f"   a worker ran its one job: {job_1.state}, CRM task {job_1.business_id}")

        # 2. The provider retries after the work is done: still a duplicate.
        late = await post(event_1)
        say(f"2. the provider retries evt_crm_1 after completion: {late} (nothing queued)")
        Workers.stop(first)

        # 3. A worker dies between the CRM call and the ledger's record.
        event_2 = response_completed("evt_crm_2", "resp_2")
        say(f"3. response.completed evt_crm_2: {await post(event_2)}")
        doomed = workers.start(**{CRASH_AFTER_CREATE: "1"})
        exit_code = await asyncio.to_thread(doomed.wait, 60)
        in_crm = [t["id"] for t in crm.tasks if t["idempotency_key"] == "crm-task:evt_crm_2"]
        job_2 = await job_of(store, "evt_crm_2")
        say(
            f"   the worker made CRM task {', '.join(in_crm)} and died before recording it "
            f"(exit {exit_code}); the job is still {job_2.state}"
        )
        workers.start()
        job_2 = await wait_for(lambda: completed(store, "evt_crm_2"), "evt_crm_2 to complete")
        effects = await store.effects.list_effects([job_2.id])
        say(
            f"   a new worker took the job after its lease (attempt {job_2.attempts}); the ledger "
            f"had the key started but not recorded, so find() asked the CRM and found "
            f"{job_2.business_id}: {job_2.state}, no second task"
        )

    per_event = {
        event_id: [t["id"] for t in crm.tasks if t["idempotency_key"] == f"crm-task:{event_id}"]
        for event_id in ("evt_crm_1", "evt_crm_2")
    }
    say(
        f"CRM: {len(crm.tasks)} tasks for 2 events "
        f"({', '.join(f'{e} -> {ids[0]}' for e, ids in per_event.items())}); "
        f"{crm.create_calls} create calls in all. Exactly one task per event."
    )
    return {
        "first_answers": sorted(answers),
        "late_retry": late,
        "crash_exit_code": exit_code,
        "tasks": crm.tasks,
        "tasks_per_event": {e: len(ids) for e, ids in per_event.items()},
        "create_calls": crm.create_calls,
        "recovered_job": {
            "state": job_2.state,
            "attempts": job_2.attempts,
            "business_id": job_2.business_id,
            "effects": [(e.key, e.state) for e in effects],
        },
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", help="store URL (default: a temporary SQLite file)")
    parser.add_argument("--summary", help="also write what happened as JSON to this file")
    parser.add_argument("--verbose", action="store_true", help="show hookinbox's own log lines")
    args = parser.parse_args()
    configure_logging("console", "info" if args.verbose else "error")
    summary = asyncio.run(main(args.database))
    if args.summary:
        Path(args.summary).write_text(json.dumps(summary, indent=2))
