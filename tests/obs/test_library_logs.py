"""What the libraries under hookinbox log (uvicorn, asyncpg's pool, asyncio) reaches an
operator as hookinbox's own JSON lines: the logger and the message template, the
exception's class and where it was raised, never the record's arguments, the exception's
text or a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hookinbox.server.protocol import CUT_LINE_INTERVAL_SECONDS
from tests.server.support import answer_to, serving_sqlite, status_of
from tests.support.processes import REPO

#: A record as asyncpg's pool logs one while the database is down, with a canary in the
#: arguments and in the exception's text.
POOL_RECORD = """\
import logging
import time
from hookinbox.logs import LIBRARY_LINE_INTERVAL_SECONDS, configure_logging

configure_logging("json", "{level}", capture_libraries=True)


def pool_failed():
    try:
        raise ConnectionRefusedError("connect to CANARY-dsn failed")
    except ConnectionRefusedError:
        logging.getLogger("asyncpg.pool").warning(
            "Failed to restore the pool connection floor; retrying %s", "CANARY-arg",
            exc_info=True,
        )


for _ in range(50):  # a burst: one line, the rest counted
    pool_failed()
logging.getLogger("httpcore.http11").debug("receive_response_headers CANARY-debug")
logging.getLogger("asyncio").error("Task exception was never retrieved\\nCANARY-second-line")
time.sleep(LIBRARY_LINE_INTERVAL_SECONDS + 0.05)
pool_failed()
"""


def json_lines(output: str) -> list[dict[str, object]]:
    """Every line of ``output`` as JSON (a line that is not JSON fails the test)."""
    return [json.loads(line) for line in output.splitlines() if line.strip()]


@pytest.mark.parametrize("level", ["debug", "info", "warning"])
def test_a_library_record_with_a_traceback_is_one_json_line_without_it(level: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", POOL_RECORD.format(level=level)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=True,
    )
    assert "CANARY" not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
    # The debug record is below what is captured; of the burst, one line.
    pool, task, pool_again = json_lines(done.stderr)
    assert pool == {
        "component": "library",
        "logger": "asyncpg.pool",
        "message": "Failed to restore the pool connection floor; retrying %s",
        "exception": "ConnectionRefusedError",
        "at": "<string>:10",
        "event": "library_log",
        "level": "warning",
        "timestamp": pool["timestamp"],
    }
    assert (task["logger"], task["level"]) == ("asyncio", "error")
    assert task["message"] == "Task exception was never retrieved"
    assert pool_again == {**pool, "suppressed": 49, "timestamp": pool_again["timestamp"]}


@pytest.mark.slow
async def test_serve_logs_malformed_requests_as_a_json_line_not_one_each(tmp_path: Path) -> None:
    server, port = serving_sqlite(tmp_path)
    try:
        server.wait_healthy(f"http://127.0.0.1:{port}", timeout=30)
        started = time.monotonic()
        answers = [await answer_to(port, b"CANARY \x00\x01 not http\r\n\r\n") for _ in range(20)]
        elapsed = time.monotonic() - started
    finally:
        server.stop()
    assert {status_of(answer) for answer in answers} == {400}
    output = server.output()
    assert "CANARY" not in output
    refused = [line for line in json_lines(output) if line["event"] == "connection_cut"]
    # One line a second at most, however fast the sender is refused.
    assert 1 <= len(refused) <= 1 + elapsed / CUT_LINE_INTERVAL_SECONDS
    assert {(line["reason"], line["status"]) for line in refused} == {("malformed_request", 400)}
    assert not [line for line in json_lines(output) if line["event"] == "library_log"]
