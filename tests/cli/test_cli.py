"""The real ``hookinbox`` command in a subprocess, on both stores."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hookinbox.store import Store
from tests.support.configs import write_config
from tests.support.database import pg_session
from tests.support.journal import add_delivery
from tests.support.processes import (
    REPO,
    HookinboxProcess,
    free_port,
    hookinbox_env,
    wait_until,
)
from tests.support.signing import SECRET, SECRET_ENV

ROUTES = [{"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}]


def hookinbox(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookinbox.cli", *args],
        env=hookinbox_env({SECRET_ENV: SECRET, **(env or {})}),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def test_a_bad_config_exits_non_zero_with_one_line_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(
        '[sources.x]\nscheme = "standard-webhooks"\nsecret_env = "X"\nsecret = "whsec_x"\n'
    )
    for command in (["serve"], ["worker"], ["migrate"], ["deliveries", "list"]):
        result = hookinbox(*command, "--config", str(config))
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert "sources.x.secret" in lines[0]
        assert "whsec_x" not in lines[0]


def test_config_comes_from_the_environment_variable(tmp_path: Path) -> None:
    result = hookinbox("deliveries", "list", env={"HOOKINBOX_CONFIG": str(tmp_path / "none.toml")})
    assert result.returncode == 2
    assert "none.toml" in result.stderr


async def test_config_falls_back_to_hookinbox_toml_in_the_working_directory(
    db_url: str, store: Store, tmp_path: Path
) -> None:
    """Neither --config nor HOOKINBOX_CONFIG: ./hookinbox.toml of the current directory."""
    await add_delivery(store, "evt_from_cwd")
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = hookinbox_env({SECRET_ENV: SECRET})
    env.pop("HOOKINBOX_CONFIG", None)

    def in_workdir(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "hookinbox.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=workdir,
        )

    missing = in_workdir("deliveries", "list", "--json")
    assert missing.returncode == 2 and "hookinbox.toml" in missing.stderr, missing.stderr
    write_config(workdir / "hookinbox.toml", db_url, routes=ROUTES)
    listed = in_workdir("deliveries", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [d["event_id"] for d in json.loads(listed.stdout)] == ["evt_from_cwd"]


def test_worker_with_a_handler_that_does_not_import_is_one_line_naming_the_route(
    tmp_path: Path,
) -> None:
    routes = [{"events": ["*"], "action": "a", "handler": "tests.support.nowhere:handler"}]
    config = write_config(tmp_path / "c.toml", f"sqlite:///{tmp_path}/x.db", routes=routes)
    result = hookinbox("worker", "--config", str(config))
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "sources.test.routes.0.handler" in line


def test_an_unreachable_database_is_one_line_and_exit_3(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    config = write_config(
        tmp_path / "c.toml", f"postgresql://postgres@127.0.0.1:{port}/test", routes=ROUTES
    )
    result = hookinbox("deliveries", "list", "--config", str(config))
    assert result.returncode == 3
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("hookinbox: store_unavailable")


#: Runs the command line as its entry point does, then names the modules of the package
#: the run imported.
_IMPORTS_OF_A_RUN = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: print(' '.join(sorted(m for m in sys.modules"
    " if m.startswith('hookinbox'))), file=sys.stderr))\n"
    "sys.argv = ['hookinbox', *sys.argv[1:]]\n"
    "runpy.run_module('hookinbox.cli', run_name='__main__')\n"
)


def test_a_command_imports_its_own_module_not_the_other_commands(tmp_path: Path) -> None:
    """Every run of the command line used to import every command's module and the app:
    most of a second of a core before a cron ``dlq list`` did anything."""
    config = write_config(tmp_path / "c.toml", f"sqlite:///{tmp_path / 'h.db'}", routes=ROUTES)
    made = hookinbox("migrate", "--create", "--config", str(config))
    assert made.returncode == 0, made.stderr
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTS_OF_A_RUN, "dlq", "list", "--config", str(config)],
        env=hookinbox_env({SECRET_ENV: SECRET}),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    imported = set(done.stderr.strip().splitlines()[-1].split())
    assert "hookinbox.cli.dlq" in imported and "hookinbox.store.core" in imported
    others = {f"hookinbox.cli.{name}" for name in ("serve", "catch_up", "maintenance", "send")}
    assert not imported & (others | {"hookinbox.app", "hookinbox.admin.views"}), imported
    # Help lists every command, each found in its module under its own name.
    listed = hookinbox("--help")
    assert listed.returncode == 0
    for name in ("catch-up", "config", "reconcile", "serve", "worker", "keys"):
        assert f"\n  {name} " in listed.stdout, listed.stdout


#: Every operator command that opens the store (not serve, worker, migrate).
OPERATOR_COMMANDS = [
    ("reconcile",),
    ("dlq", "list"),
    ("dlq", "retry", "--all", "--limit", "5"),
    ("deliveries", "list"),
    ("deliveries", "show", "evt_1"),
    ("sources", "list"),
    ("sources", "pause", "test"),
    ("purge", "--dry-run"),
    ("erase", "--subject", "cus_1", "--dry-run"),
    ("trace", "evt_1"),
    ("replay", "dlv_1"),
    ("rejected", "list"),
    ("outbox", "list"),
    ("resources", "list"),
]


@pytest.mark.parametrize("command", OPERATOR_COMMANDS, ids=" ".join)
def test_an_operator_command_on_a_mistyped_sqlite_path_fails_and_creates_nothing(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A cron ``reconcile`` pointed at a typo must fail, never report a new empty store."""
    missing = tmp_path / "typo" / "hookinbox.db"
    config = write_config(tmp_path / "c.toml", f"sqlite:///{missing}", routes=ROUTES)
    result = hookinbox(*command, "--config", str(config))
    assert result.returncode == 3, (command, result.stdout, result.stderr)
    assert result.stdout == "", command
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("hookinbox: store_not_found: "), (command, line)
    assert not (tmp_path / "typo").exists(), command


def test_an_operator_command_in_an_existing_directory_without_the_file_creates_nothing(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "typo" / "hookinbox.db"
    config = write_config(tmp_path / "c.toml", f"sqlite:///{missing}", routes=ROUTES)
    (tmp_path / "typo").mkdir()
    result = hookinbox("reconcile", "--config", str(config))
    assert (result.returncode, missing.exists()) == (3, False)


def test_an_operator_command_on_a_store_never_migrated_fails_until_migrate(
    db_url: str, tmp_path: Path
) -> None:
    """An empty PostgreSQL schema, an empty SQLite file: no hookinbox store in either."""
    if db_url.startswith("sqlite:"):
        Path(db_url.removeprefix("sqlite://")).touch()
    config = write_config(tmp_path / "c.toml", db_url, routes=ROUTES)
    refused = hookinbox("dlq", "list", "--config", str(config))
    assert refused.returncode == 3
    assert refused.stderr.startswith("hookinbox: store_not_found: "), refused.stderr
    assert hookinbox("migrate", "--config", str(config)).returncode == 0
    listed = hookinbox("dlq", "list", "--config", str(config))
    assert listed.returncode == 0, listed.stderr


def test_a_postgresql_database_that_does_not_exist_is_store_not_found(tmp_path: Path) -> None:
    from tests.support.database import PG_URL, require_pg

    require_pg()
    url = PG_URL.rsplit("/", 1)[0] + "/hookinbox_no_such_database"
    config = write_config(tmp_path / "c.toml", url, routes=ROUTES)
    result = hookinbox("reconcile", "--config", str(config))
    assert result.returncode == 3
    assert result.stderr.startswith("hookinbox: store_not_found: "), result.stderr


def test_a_postgresql_connection_error_names_the_problem_and_the_address_never_the_password(
    tmp_path: Path,
) -> None:
    """A role or a database that does not exist, a port nothing listens on: each is one
    line saying so in words, with the host and port tried; the URL (password and all)
    never."""
    from tests.support.database import pg_address, require_pg

    require_pg()
    host, port = pg_address()
    refused = free_port()
    cases = [
        (
            f"postgresql://hookinbox_no_such_role:s3cret@{host}:{port}/test",
            "store_unavailable",
            f'PostgreSQL at {host}:{port} refused the connection: role "hookinbox_no_such_role"'
            " does not exist",
        ),
        (
            f"postgresql://postgres:s3cret@{host}:{port}/hookinbox_no_such_database",
            "store_not_found",
            f"no such PostgreSQL database at {host}:{port}: database"
            ' "hookinbox_no_such_database" does not exist',
        ),
        (
            f"postgresql://postgres:s3cret@127.0.0.1:{refused}/test",
            "store_unavailable",
            f"cannot connect to PostgreSQL at 127.0.0.1:{refused}: connection refused",
        ),
    ]
    config = tmp_path / "c.toml"
    config.write_text(
        f'database_env = "HOOKINBOX_TEST_DATABASE"\n[sources.test]\nscheme = "standard-webhooks"'
        f'\nsecret_env = "{SECRET_ENV}"\n'
    )
    for url, code, says in cases:
        result = hookinbox(
            "dlq", "list", "--config", str(config), env={"HOOKINBOX_TEST_DATABASE": url}
        )
        assert (result.returncode, result.stdout) == (3, ""), result.stderr
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"hookinbox: {code}: {says}"), line
        assert "s3cret" not in line and "postgresql://" not in line


def test_migrate_applies_once(db_url: str, tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", db_url, routes=ROUTES)
    first = hookinbox("migrate", "--config", str(config))
    assert first.returncode == 0, first.stderr
    assert "001_init" in first.stdout
    newest = max(int(name) for name in re.findall(r"\b(\d{3})_\w+", first.stdout))
    assert first.stdout.strip().endswith(f"(schema version {newest})"), first.stdout
    second = hookinbox("migrate", "--config", str(config))
    assert (second.returncode, second.stdout.strip()) == (
        0,
        f"schema is up to date (version {newest})",
    )


async def record_migration(db_url: str, version: int, name: str) -> None:
    """A row of schema_migrations as a newer release's migrate would leave it."""
    if db_url.startswith("sqlite"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as conn:
            conn.execute(  # applied_at in unix seconds, as SQLite's store keeps times
                "INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, time.time())
            )
        return
    async with pg_session(db_url) as conn:
        await conn.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name
        )


async def test_an_older_hookinbox_than_the_store_says_so_at_migrate_and_start_up(
    db_url: str, store: Store, tmp_path: Path
) -> None:
    """A newer release migrated the store (a version this one does not have), then this
    one runs on it, as after a rollback: ``migrate`` refuses to call it up to date, and
    ``serve`` and ``worker`` say it at start-up and run on, since a rolling upgrade
    passes through exactly that."""
    versions = await store.schema_versions()
    assert (versions.store, versions.store_is_newer) == (versions.code, False)
    newer = versions.code + 1
    await record_migration(db_url, newer, f"{newer:03d}_from_a_newer_release")
    assert (await store.schema_versions()).store_is_newer
    port = free_port()
    config = write_config(tmp_path / "c.toml", db_url, routes=ROUTES, port=port)

    refused = hookinbox("migrate", "--config", str(config))
    assert (refused.returncode, refused.stdout) == (3, ""), refused.stderr
    assert refused.stderr.splitlines() == [
        f"hookinbox: store_schema_newer: the store's schema is at version {newer}, newer"
        f" than this hookinbox's {versions.code}: a newer release migrated it; run that"
        " release"
    ]

    env = hookinbox_env({SECRET_ENV: SECRET})
    worker = HookinboxProcess(["worker", "--config", str(config)], env, tmp_path / "w.log")
    server = HookinboxProcess(
        ["serve", "--config", str(config), "--no-workers"], env, tmp_path / "s.log"
    )
    worker.start()
    server.start()
    try:
        server.wait_healthy(f"http://127.0.0.1:{port}")
        for process in (worker, server):

            def warned(process: HookinboxProcess = process) -> bool:
                assert process.proc is not None and process.proc.poll() is None, process.output()
                return '"store_schema_newer"' in process.output()

            wait_until(warned, 30, "the start-up warning")
            (line,) = (
                json.loads(text)
                for text in process.output().splitlines()
                if '"store_schema_newer"' in text
            )
            assert {k: line[k] for k in ("event", "level", "store_version", "code_version")} == {
                "event": "store_schema_newer",
                "level": "warning",
                "store_version": newer,
                "code_version": versions.code,
            }
    finally:
        worker.stop()
        server.stop()
    assert worker.proc is not None and worker.proc.returncode == 0, worker.output()


@pytest.mark.slow
def test_send_shows_a_duplicate_ignored_and_a_tampered_body_refused_then_the_journal(
    db_url: str, tmp_path: Path
) -> None:
    port = free_port()
    config = write_config(tmp_path / "c.toml", db_url, routes=ROUTES, port=port)
    server = HookinboxProcess(
        ["serve", "--config", str(config)],
        hookinbox_env({SECRET_ENV: SECRET}),
        tmp_path / "serve.log",
    ).start()
    try:
        server.wait_healthy(f"http://127.0.0.1:{port}")
        sent = hookinbox(
            "send",
            "--config",
            str(config),
            "--id",
            "evt_cli",
            "--type",
            "crm.lead.created",
            "--data",
            '{"name": "Ada"}',
            "--repeat",
            "4",
            "--concurrent",
            "--json",
        )
        assert sent.returncode == 0, sent.stderr
        answers = [json.loads(line) for line in sent.stdout.splitlines()]
        assert sorted(a["status"] for a in answers) == ["accepted"] + ["duplicate"] * 3
        tampered = hookinbox("send", "--config", str(config), "--tamper")
        assert tampered.returncode == 0
        assert "400 invalid_signature" in tampered.stdout

        shown = hookinbox("deliveries", "show", "evt_cli", "--config", str(config), "--json")
        assert shown.returncode == 0, shown.stderr
        data = json.loads(shown.stdout)
        for key in (
            "delivery_id",
            "source",
            "event_id",
            "type",
            "status",
            "first_seen_at",
            "last_seen_at",
            "delivery_count",
            "body_sha256",
            "conflicts",
            "jobs",
        ):
            assert key in data
        assert (data["event_id"], data["type"], data["delivery_count"]) == (
            "evt_cli",
            "crm.lead.created",
            4,
        )
        for key in ("action", "state", "attempts", "last_error", "next_attempt_at", "business_id"):
            assert key in data["jobs"][0]
        by_id = hookinbox(
            "deliveries", "show", data["delivery_id"], "--config", str(config), "--json"
        )
        assert json.loads(by_id.stdout)["event_id"] == "evt_cli"

        listed = hookinbox(
            "deliveries", "list", "--config", str(config), "--json", "--source", "test"
        )
        assert [d["event_id"] for d in json.loads(listed.stdout)] == ["evt_cli"]
        human = hookinbox("deliveries", "show", "evt_cli", "--config", str(config))
        assert "evt_cli" in human.stdout and "count" in human.stdout
    finally:
        server.stop()


def test_an_unknown_id_is_one_line_and_exit_4(db_url: str, tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", db_url, routes=ROUTES)
    assert hookinbox("migrate", "--config", str(config)).returncode == 0
    result = hookinbox("deliveries", "show", "evt_nope", "--config", str(config))
    assert result.returncode == 4
    assert (
        result.stderr.strip() == "hookinbox: not_found: no delivery with id or event id 'evt_nope'"
    )
    empty = hookinbox("deliveries", "list", "--config", str(config), "--json")
    assert (empty.returncode, json.loads(empty.stdout)) == (0, [])


def test_send_without_the_secret_says_which_variable(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", f"sqlite:///{tmp_path}/x.db", routes=ROUTES)
    result = hookinbox("send", "--config", str(config), env={SECRET_ENV: ""})
    assert result.returncode == 2
    assert SECRET_ENV in result.stderr


def test_serve_with_an_unreachable_database_is_one_line_and_exit_3(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(
        tmp_path / "c.toml", f"postgresql://postgres@127.0.0.1:{port}/test", routes=ROUTES
    )
    result = hookinbox("serve", "--config", str(config), "--port", str(free_port()))
    assert result.returncode == 3
    assert result.stderr.strip().startswith("hookinbox: store_unavailable")
    assert len(result.stderr.strip().splitlines()) == 1
