"""What a config can get wrong, as the ``hookinbox`` command reports it: one line naming
the problem and the exit code of its kind (2 config, 3 store), the same from
``config check``, ``migrate`` and ``serve``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_cli import hookinbox
from tests.support.configs import write_config
from tests.support.processes import REPO, free_port
from tests.support.signing import SECRET_ENV

ROUTES = [{"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}]


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_serve_refuses_a_sqlite_path_whose_directory_does_not_exist(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.toml", "sqlite:///nosuchdir/q.db", routes=ROUTES, port=free_port()
    )
    for command in (["serve"], ["migrate"]):
        result = hookinbox(*command, "--config", str(config))
        assert result.returncode == 3, (command, result.stderr)
        line = one_line(result)
        assert line.startswith("hookinbox: store_not_found: ") and "nosuchdir" in line
        assert "migrate --create" in line
    assert not (tmp_path / "nosuchdir").exists() and not (REPO / "nosuchdir").exists()

    made = hookinbox("migrate", "--create", "--config", str(config))
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "nosuchdir" / "q.db").is_file()


def test_a_relative_sqlite_path_is_relative_to_the_config_file(tmp_path: Path) -> None:
    folder = tmp_path / "etc"
    folder.mkdir()
    config = write_config(folder / "c.toml", "sqlite:///data/store.db", routes=ROUTES)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    made = hookinbox("migrate", "--create", "--config", str(config), cwd=elsewhere)
    assert made.returncode == 0, made.stderr
    assert (folder / "data" / "store.db").is_file()
    assert not (elsewhere / "data").exists()
    listed = hookinbox("deliveries", "list", "--json", "--config", str(config), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []


def test_an_unknown_key_is_named_with_the_key_it_is_closest_to(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        f'database = "sqlite:///x.db"\n[sources.test]\nsecret_evn = "{SECRET_ENV}"\n'
        '[[sources.test.routes]]\naction = "a"\nhandlr = "tests.support.handlers:count"\n'
    )
    for command in (["config", "check"], ["serve"]):
        result = hookinbox(*command, "--config", str(config))
        assert result.returncode == 2, (command, result.stderr)
        assert one_line(result) == (
            "hookinbox: config_error: sources.test.routes.0.handlr: unknown key"
            " (did you mean 'handler'?)"
        )
    config.write_text(config.read_text().replace("handlr", "handler"))
    assert one_line(hookinbox("config", "check", "--config", str(config))) == (
        "hookinbox: config_error: sources.test.secret_evn: unknown key (did you mean 'secret_env'?)"
    )


#: Configs `serve` refuses after the file itself validated: (what, env, routes, what the
#: one line names).
REFUSED = [
    ("a placeholder secret", {SECRET_ENV: "whsec_..."}, ROUTES, "sources.test.secret_env"),
    (
        "a handler that does not import",
        {},
        [{"events": ["*"], "action": "a", "handler": "tests.support.nowhere:handler"}],
        "sources.test.routes.0.handler",
    ),
    (
        "an API token too short",
        {"HOOKINBOX_API_TOKENS": "ci:read:short"},
        ROUTES,
        "HOOKINBOX_API_TOKENS entry 1",
    ),
]


@pytest.mark.parametrize(
    ("env", "routes", "named"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_config_check_refuses_what_serve_refuses_with_the_same_line(
    tmp_path: Path, env: dict[str, str], routes: list[dict[str, str]], named: str
) -> None:
    config = write_config(tmp_path / "c.toml", f"sqlite:///{tmp_path}/x.db", routes=routes)
    checked = hookinbox("config", "check", "--config", str(config), env=env)
    served = hookinbox("serve", "--config", str(config), "--port", str(free_port()), env=env)
    assert (checked.returncode, served.returncode) == (2, 2), (checked.stderr, served.stderr)
    assert one_line(checked) == one_line(served)
    assert one_line(checked).startswith("hookinbox: config_error: ") and named in checked.stderr
    assert "whsec_..." not in checked.stderr and "short" not in checked.stderr.split(named)[0]


def test_migrate_runs_the_same_check_and_makes_no_store(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", f"sqlite:///{tmp_path}/x.db", routes=ROUTES)
    refused = hookinbox("migrate", "--config", str(config), env={SECRET_ENV: "whsec_..."})
    assert refused.returncode == 2
    assert "sources.test.secret_env" in one_line(refused)
    assert not (tmp_path / "x.db").exists()
    checked = hookinbox("config", "check", "--config", str(config))
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == "config ok: 1 sources, 1 routes"
    as_json = hookinbox("config", "check", "--json", "--config", str(config))
    assert json.loads(as_json.stdout) == {"ok": True, "sources": 1, "routes": 1}


def test_database_env_unset_is_one_line_naming_it(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", "sqlite:///x.db", routes=ROUTES)
    config.write_text(
        config.read_text().replace(
            'database = "sqlite:///x.db"', 'database_env = "APP_DATABASE_URL"'
        )
    )
    unset = hookinbox("deliveries", "list", "--config", str(config))
    assert unset.returncode == 2
    assert one_line(unset) == (
        "hookinbox: config_error: database_env: environment variable APP_DATABASE_URL"
        " is not set or empty"
    )


def test_the_database_url_can_come_from_the_environment(db_url: str, tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", db_url, routes=ROUTES)
    text = config.read_text().replace(f"database = {json.dumps(db_url)}", "", 1)
    config.write_text('database_env = "APP_DATABASE_URL"\n' + text)
    env = {"APP_DATABASE_URL": db_url}
    assert hookinbox("migrate", "--config", str(config), env=env).returncode == 0
    listed = hookinbox("deliveries", "list", "--json", "--config", str(config), env=env)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []
