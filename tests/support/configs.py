"""Config files for the processes the tests start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.signing import SECRET_ENV

REPO = Path(__file__).resolve().parents[2]


def quickstart_environment() -> dict[str, str]:
    """examples/quickstart.env: the demo environment `make run` and `make shell` set (the
    quickstart sources' secrets, the admin and API tokens)."""
    lines = (REPO / "examples" / "quickstart.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line.strip() and not line.startswith("#"))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def write_config(
    path: Path,
    db_url: str,
    *,
    routes: list[dict[str, Any]],
    port: int = 8080,
    worker: dict[str, Any] | None = None,
    source: dict[str, Any] | None = None,
    extra: str = "",
) -> Path:
    settings = {
        "concurrency": 4,
        "max_attempts": 5,
        "backoff_base_seconds": 0.2,
        "backoff_max_seconds": 1,
        "lease_seconds": 2,
        "poll_interval_seconds": 0.2,
        **(worker or {}),
    }
    lines = [f"database = {_toml_value(db_url)}", extra, "[server]", 'host = "127.0.0.1"']
    lines += [f"port = {port}", "[worker]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in settings.items()]
    lines += ["[sources.test]", 'scheme = "standard-webhooks"', f'secret_env = "{SECRET_ENV}"']
    lines += [f"{k} = {_toml_value(v)}" for k, v in (source or {}).items()]
    for route in routes:
        lines.append("[[sources.test.routes]]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in route.items()]
    path.write_text("\n".join(lines) + "\n")
    return path
