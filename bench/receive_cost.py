"""CPU per delivery of hookinbox's whole receive path, in one process: the server's share
without the machine's noise.

`run.py --modes receive` measures the server under wrk, and on a shared 2-core machine
its CPU per request moves by a third from one run to the next (wrk, PostgreSQL and other
work take the same cores). This drives the real app instead, in-process on uvloop: C
kept-alive connections of hookinbox's own HTTP protocol (EdgeProtocol) over in-memory
transports, each sending its next signed delivery (unique ids) as soon as its answer is
written, the real Inbox (`serve --no-workers`'s app, the garbage collector set up as
`serve` sets it) and a real store (a new SQLite file or PostgreSQL database). It prints
the process's CPU time per delivery (the store server's own CPU is not in it; SQLite's
is) and the reservation batches' sizes, each round and the median. Compare two
checkouts by running it with each one's ``src`` on PYTHONPATH, alternately. Nothing
spreads the requests out in time here: a batch's answers release the next requests of
all its connections in one turn of the loop, so batches hold all C deliveries (under
wrk they hold about a third of that), and a cost per batch weighs less than it does
in the server.

    .venv/bin/python bench/receive_cost.py [--store pg|sqlite] [--requests 15000]
        [--connections 32] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop
from harness import Signer, fresh_hookinbox_store, hookinbox_config, pg_drop, signed_requests
from harness import unique_ids as new_ids
from uvicorn.server import ServerState

from hookinbox.app import Inbox
from hookinbox.config import load_config
from hookinbox.logs import configure_logging
from hookinbox.server import ConnectionLimits, EdgeProtocol, uvicorn_config

PORT = 8000


class Transport:
    """What EdgeProtocol writes to: answers are read back here, never sent."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._closing = False

    def write(self, data: bytes) -> None:
        self._client.answered(data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name in ("sockname", "peername"):
            return ("127.0.0.1", PORT if name == "sockname" else 40000 + self._client.number)
        return default

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True

    abort = close

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def get_write_buffer_size(self) -> int:
        return 0

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None: ...


class Client:
    """One connection of the closed loop: its next request once its answer is whole."""

    def __init__(self, number: int, run: Round) -> None:
        self.number = number
        self._run = run
        self._answer = b""
        self.protocol: EdgeProtocol | None = None

    def answered(self, data: bytes) -> None:
        self._answer += data
        head_end = self._answer.find(b"\r\n\r\n")
        if head_end < 0:
            return
        head = self._answer[:head_end].lower()
        length = int(head.split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
        if len(self._answer) < head_end + 4 + length:
            return
        if not self._answer.startswith(b"HTTP/1.1 200"):
            self._run.errors += 1
        self._answer = b""
        self._run.done += 1
        self._run.loop.call_soon(self._run.send_next, self)


class Round:
    def __init__(self, loop: asyncio.AbstractEventLoop, requests: list[bytes], total: int):
        self.loop = loop
        self._requests = iter(requests)
        self.total = total
        self.done = 0
        self.errors = 0
        self.finished: asyncio.Future[None] = loop.create_future()

    def send_next(self, client: Client) -> None:
        if self.done >= self.total:
            if not self.finished.done():
                self.finished.set_result(None)
            return
        request = next(self._requests, None)
        if request is not None and client.protocol is not None:
            client.protocol.data_received(request)


async def measure(args: argparse.Namespace, config_path: Path, signer: Signer) -> None:
    config = load_config(str(config_path))
    inbox = Inbox(config, run_workers=False)
    server = uvicorn_config(
        inbox.app, ConnectionLimits.from_config(config.server), host="127.0.0.1", port=PORT
    )
    server.load()  # as `serve` does: the app, then the collector's settings (settle_heap)
    await inbox.start()
    state = ServerState()
    loop = asyncio.get_running_loop()
    metrics = inbox.metrics
    cpu: list[float] = []
    try:
        for number in range(args.rounds + 1):  # the first round warms up, unreported
            total = args.requests if number else min(3000, args.requests)
            requests = signed_requests(PORT, signer, new_ids(total + args.connections))
            run = Round(loop, requests, total)
            clients = [Client(n, run) for n in range(args.connections)]
            for client in clients:
                client.protocol = EdgeProtocol(server, state, {}, _loop=loop)
                client.protocol.connection_made(Transport(client))  # type: ignore[arg-type]
            batches0 = _batches(metrics)
            started, wall = time.process_time(), time.perf_counter()
            for client in clients:
                run.send_next(client)
            await run.finished
            spent, wall = time.process_time() - started, time.perf_counter() - wall
            batches = _batches(metrics) - batches0
            for client in clients:
                assert client.protocol is not None
                client.protocol.connection_lost(None)
            if not number:
                continue
            cpu.append(spent / run.done * 1e6)
            print(
                f"round {number}: {cpu[-1]:6.1f} us CPU per delivery, {run.done / wall:,.0f}/s,"
                f" {run.done / max(batches, 1):.1f} per batch, non-200 {run.errors}",
                flush=True,
            )
    finally:
        await inbox.stop()
    print(f"median: {statistics.median(cpu):.1f} us CPU per delivery ({args.store})")


def _batches(metrics: Any) -> float:
    value = metrics.registry.get_sample_value("hookinbox_reserve_batch_size_count")
    return float(value or 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["pg", "sqlite"], default="pg")
    parser.add_argument("--requests", type=int, default=15000)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    os.environ["BENCH_SECRET"] = secret
    tmp = Path(tempfile.mkdtemp(prefix="receive-cost-"))
    store = fresh_hookinbox_store(args.store, "receive_cost", tmp)
    try:
        config = hookinbox_config(store, tmp, "receive-cost", dict(os.environ), 32)
        # The receipt lines go where `serve`'s would (stderr), redirect it to keep them.
        configure_logging("json", "info", capture_libraries=True)
        uvloop.run(measure(args, config, Signer.from_secret(secret)))
    finally:
        if store.pg_db:
            pg_drop(store.pg_db)


if __name__ == "__main__":
    main()
