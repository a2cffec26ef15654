"""The HTTP server of ``hookinbox serve``: the edge that faces the internet.

A protocol of hookinbox's own (:mod:`~hookinbox.server.protocol`) reads each connection in
phases that each have a deadline and a bound, frames bodies itself and counts every byte
(:mod:`~hookinbox.server.framing`), and runs the ASGI app one request at a time per
connection (:mod:`~hookinbox.server.cycle`); uvicorn runs the processes, the lifespan and
the signals around it (:mod:`~hookinbox.server.run`). The threat model, the bounds and
the measurements behind them are in docs/server.md.
"""

from hookinbox.server.cycle import AnswerWriter
from hookinbox.server.limits import (
    LINGER_BYTES,
    LINGER_SECONDS,
    PIPELINE_DEPTH,
    RESERVED_FILES,
    ConnectionLimits,
    ensure_open_files,
)
from hookinbox.server.protocol import EdgeProtocol
from hookinbox.server.run import listen, run_server, uvicorn_config

__all__ = [
    "LINGER_BYTES",
    "LINGER_SECONDS",
    "PIPELINE_DEPTH",
    "RESERVED_FILES",
    "AnswerWriter",
    "ConnectionLimits",
    "EdgeProtocol",
    "ensure_open_files",
    "listen",
    "run_server",
    "uvicorn_config",
]
