"""hookinbox's loggers write their JSON lines without structlog's dispatch while
hookinbox's own configuration is in place: each line must be the one structlog writes
for the same call, and a configuration that changes the processors (a test's
``capture_logs``) must take the lines back at once."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.processes import REPO

LINES = """\
import json
import sys

import structlog

from hookinbox.logs import REQUEST_ID, configure_logging, get_logger

configure_logging("json", "info")
ours = get_logger("hookinbox.ingest")
theirs = structlog.get_logger(component="ingest")
REQUEST_ID.set("req-1")
for logger in (ours, theirs):
    logger.info("receipt", source="s", jobs=1, when=object.__name__, size=2.5)
for logger in (ours, theirs):
    logger.warning("slow %s", "x", seconds=3)
ours.debug("below_the_level")
with structlog.testing.capture_logs() as captured:
    ours.info("captured", n=1)
ours.error("after_capture")
print(json.dumps(captured))
"""


def test_a_direct_line_is_the_line_structlog_writes_and_capture_logs_still_captures() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LINES],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=True,
    )
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    events = [line["event"] for line in lines]
    assert events == ["receipt", "receipt", "slow x", "slow x", "after_capture"]
    for ours, theirs in (lines[0:2], lines[2:4]):
        assert list(ours) == list(theirs)
        assert {**ours, "timestamp": ""} == {**theirs, "timestamp": ""}
    assert lines[0] == {
        "component": "ingest",
        "source": "s",
        "jobs": 1,
        "when": "object",
        "size": 2.5,
        "event": "receipt",
        "request_id": "req-1",
        "level": "info",
        "timestamp": lines[0]["timestamp"],
    }
    assert lines[4]["level"] == "error" and lines[4]["request_id"] == "req-1"
    (captured,) = json.loads(done.stdout)
    assert (captured["event"], captured["n"], captured["log_level"]) == ("captured", 1, "info")
