"""``hookinbox serve`` applies the ``[server]`` deadlines and bounds, in one process and in
several, and refuses limits it cannot keep, naming the key."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hookinbox.config import config_from_mapping
from hookinbox.errors import ConfigError
from hookinbox.server import RESERVED_FILES, ConnectionLimits, ensure_open_files
from tests.server.support import (
    HEAD,
    HEALTHZ_CLOSE,
    answer_to,
    status_of,
    trickle,
    write_config,
)
from tests.support.processes import REPO, HookinboxProcess, free_port, hookinbox_env
from tests.support.signing import SECRET, SECRET_ENV


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2])
async def test_serve_cuts_off_a_trickling_head_and_answers_an_oversized_one_431(
    tmp_path: Path, processes: int
) -> None:
    port = free_port()
    config = write_config(tmp_path / "c.toml", f"sqlite:///{tmp_path}/h.db", port)
    server = HookinboxProcess(
        ["serve", "--config", str(config), "--no-workers", "--processes", str(processes)],
        hookinbox_env({SECRET_ENV: SECRET}),
        tmp_path / "serve.log",
    ).start()
    try:
        server.wait_healthy(f"http://127.0.0.1:{port}", timeout=30)
        outcomes = [await trickle(port, drip=HEAD + b"X-Slow: " + b"a" * 50) for _ in range(2)]
        oversized = await answer_to(port, HEAD + b"X-Big: " + b"a" * 8000 + b"\r\n\r\n")
        health = await answer_to(port, HEALTHZ_CLOSE)
    finally:
        server.stop()
    for outcome in outcomes:
        assert outcome.status == 408
        assert outcome.closed_after < 3.0
    assert status_of(oversized) == 431
    assert status_of(health) == 200


@pytest.mark.slow
def test_more_connections_than_the_open_files_limit_allows_is_refused_naming_the_key(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path / "c.toml",
        f"sqlite:///{tmp_path}/h.db",
        free_port(),
        server="max_connections = 5000\n",
    )

    serve = [sys.executable, "-m", "hookinbox.cli", "serve", "--config", str(config)]
    done = subprocess.run(
        ["bash", "-c", 'ulimit -n 1024 && exec "$@"', "bash", *serve],  # hard limit 1024
        env=hookinbox_env({SECRET_ENV: SECRET}),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("hookinbox: config_error: server.max_connections:"), done.stderr
    assert "ulimit -n" in done.stderr


def test_the_open_files_limit_is_raised_to_what_the_connections_need(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[int, tuple[int, int]]] = []
    monkeypatch.setattr(resource, "getrlimit", lambda which: (1024, 4096))
    monkeypatch.setattr(resource, "setrlimit", lambda which, lim: calls.append((which, lim)))
    ensure_open_files(ConnectionLimits(max_connections=2000))
    assert calls == [(resource.RLIMIT_NOFILE, (2000 + RESERVED_FILES, 4096))]
    calls.clear()
    ensure_open_files(ConnectionLimits(max_connections=512))  # fits already: untouched
    assert calls == []


@pytest.mark.parametrize(
    ("server", "key"),
    [
        ({"header_timeout_seconds": 0}, "server.header_timeout_seconds"),
        ({"body_timeout_seconds": -1}, "server.body_timeout_seconds"),
        ({"keep_alive_timeout_seconds": "soon"}, "server.keep_alive_timeout_seconds"),
        ({"max_header_bytes": 100}, "server.max_header_bytes"),
        ({"max_connections": 0}, "server.max_connections"),
        ({"header_timeout": 10}, "server.header_timeout"),
    ],
)
def test_a_bad_server_limit_is_one_error_naming_the_key(server: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({"server": server})
    assert caught.value.message.startswith(key), caught.value.message


def test_the_server_limits_come_from_the_config() -> None:
    config = config_from_mapping({"server": {"header_timeout_seconds": 2, "max_connections": 9}})
    limits = ConnectionLimits.from_config(config.server)
    assert limits == ConnectionLimits(header_timeout=2.0, max_connections=9)
    assert ConnectionLimits.from_config(config_from_mapping({}).server) == ConnectionLimits()
