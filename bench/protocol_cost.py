"""CPU per request of uvicorn's httptools protocol and of hookinbox's own (EdgeProtocol).

The end-to-end bench (run.py) cannot see a few microseconds on a shared 2-core machine,
so this drives both protocol classes directly, in one process, on uvloop: one kept-alive
connection with an in-memory transport, a minimal ASGI app, N requests each, the two
classes alternated over several rounds; it prints the CPU time (process_time) per request
of each round and the medians.

    .venv/bin/python bench/protocol_cost.py [--requests 20000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import uvloop
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from hookinbox.server import ConnectionLimits, EdgeProtocol, uvicorn_config

REQUEST = (
    b"POST /webhooks/bench HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"webhook-id: msg_2a8c1f\r\nwebhook-timestamp: 1700000000\r\n"
    b"webhook-signature: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=\r\n"
    b"Content-Length: 300\r\n\r\n" + b"x" * 300
)


class MemoryTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = 0
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8080), "peername": ("127.0.0.1", 50000)}.get(
            name, default
        )

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += len(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


async def app(scope: Any, receive: Any, send: Any) -> None:
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-length", b"2")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"ok"})


async def run(protocol_class: Any, config: Config, requests: int) -> float:
    state = ServerState()
    protocol = protocol_class(config=config, server_state=state, app_state={})
    transport = MemoryTransport()
    protocol.connection_made(transport)
    tasks = state.tasks
    started = time.process_time()
    for _ in range(requests):
        protocol.data_received(REQUEST)
        while tasks:
            await asyncio.gather(*tasks)
    spent = time.process_time() - started
    transport.close()
    protocol.connection_lost(None)
    return spent / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    config = uvicorn_config(app, ConnectionLimits(), host="127.0.0.1", port=0)
    config.lifespan = "off"
    config.load()
    results: dict[str, list[float]] = {"uvicorn": [], "edge": []}
    loop = uvloop.new_event_loop()
    for _ in range(args.rounds):
        for name, cls in (("uvicorn", HttpToolsProtocol), ("edge", EdgeProtocol)):
            results[name].append(loop.run_until_complete(run(cls, config, args.requests)))
    loop.close()
    for name, values in results.items():
        rounds = " ".join(f"{v:.2f}" for v in values)
        print(
            f"{name:8} median {statistics.median(values):6.2f}  min {min(values):6.2f}"
            f" us/request  ({rounds})"
        )
    for how, pick in (("median", statistics.median), ("min", min)):
        base, edge = (pick(results[k]) for k in ("uvicorn", "edge"))
        change = f"{edge - base:+.2f} us/request ({edge / base - 1:+.1%})"
        print(f"edge - uvicorn ({how}): {change}")


if __name__ == "__main__":
    main()
