"""The outage scenario through the real binaries, on both stores: a stand-in Stripe and a
stand-in GitHub send signed webhooks to ``hookinbox serve``; the server is stopped while
they send (those deliveries fail, as the providers' logs say); after the restart,
``hookinbox catch-up`` brings exactly the missing events, and the handler (which records
every call in a file, from every process) runs each event once."""

from __future__ import annotations

import asyncio
import collections
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookinbox.store import open_store_for
from tests.support.processes import (
    REPO,
    HookinboxProcess,
    free_port,
    hookinbox_env,
    run_hookinbox,
    wait_until,
)
from tests.support.provider_standins import GitHubStandIn, StripeStandIn
from tests.support.signing import SECRET, SECRET_ENV


@pytest.fixture
def providers() -> Iterator[tuple[StripeStandIn, GitHubStandIn]]:
    with StripeStandIn() as stripe_api, GitHubStandIn() as github_api:
        yield stripe_api, github_api


def _config(path: Path, db_url: str, port: int, stripe_url: str, github_url: str) -> Path:
    route = (
        '[[sources.{name}.routes]]\nevents = ["*"]\naction = "record"\n'
        'handler = "tests.support.handlers:record_to_file"\n'
    )
    path.write_text(
        f"database = {json.dumps(db_url)}\n"
        f'[server]\nhost = "127.0.0.1"\nport = {port}\n'
        "[worker]\nconcurrency = 4\nmax_attempts = 5\nbackoff_base_seconds = 0.2\n"
        "backoff_max_seconds = 1\nlease_seconds = 5\npoll_interval_seconds = 0.2\n"
        f'[sources.stripe]\nscheme = "stripe"\nsecret_env = "{SECRET_ENV}"\n'
        + route.format(name="stripe")
        + '[sources.stripe.catch_up]\napi_key_env = "HB_STRIPE_KEY"\n'
        f'api_base = "{stripe_url}"\npage_size = 4\nwindow = "1d"\n'
        f'[sources.github]\nscheme = "github"\nsecret_env = "{SECRET_ENV}"\n'
        + route.format(name="github")
        + '[sources.github.catch_up]\napi_key_env = "HB_GITHUB_KEY"\n'
        f'api_base = "{github_url}"\nhook = "repos/acme/shop/hooks/1"\npage_size = 4\n'
    )
    return path


def _env(stripe_api: StripeStandIn, github_api: GitHubStandIn, calls: Path) -> dict[str, str]:
    return hookinbox_env(
        {
            SECRET_ENV: SECRET,
            "HB_STRIPE_KEY": stripe_api.api_key,
            "HB_GITHUB_KEY": github_api.api_key,
            "HB_TEST_CALLS_FILE": str(calls),
        }
    )


def _catch_up(config: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "hookinbox.cli",
            "catch-up",
            "--json",
            "--config",
            str(config),
            *args,
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=90,
    )


def _reports(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, object]]:
    assert done.returncode == 0, done.stderr
    return {report["source"]: report for report in json.loads(done.stdout)}


def _calls(path: Path) -> collections.Counter[str]:
    lines = path.read_text().splitlines() if path.exists() else []
    return collections.Counter(lines)


def test_after_an_outage_catch_up_brings_exactly_the_missing_events_each_processed_once(
    db_url: str, tmp_path: Path, providers: tuple[StripeStandIn, GitHubStandIn]
) -> None:
    stripe_api, github_api = providers
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    calls = tmp_path / "calls.txt"
    config = _config(tmp_path / "hookinbox.toml", db_url, port, stripe_api.url, github_api.url)
    env = _env(stripe_api, github_api, calls)
    server = HookinboxProcess(["serve", "--config", str(config)], env, tmp_path / "serve.log")
    stripe_events = stripe_api.add(18)
    github_events = github_api.add(18)
    try:
        server.start().wait_healthy(base)
        stripe_api.send(f"{base}/webhooks/stripe", SECRET, stripe_events[:6])
        github_api.send(f"{base}/webhooks/github", SECRET, github_events[:6])
        assert all(e.delivered for e in stripe_events[:6])
        server.stop()

        # The receiver is down: these deliveries fail, and GitHub never tries again.
        stripe_api.send(f"{base}/webhooks/stripe", SECRET, stripe_events[6:14])
        github_api.send(f"{base}/webhooks/github", SECRET, github_events[6:14])
        assert not any(e.delivered for e in stripe_events[6:14])

        server = HookinboxProcess(["serve", "--config", str(config)], env, tmp_path / "s2.log")
        server.start().wait_healthy(base)
        stripe_api.send(f"{base}/webhooks/stripe", SECRET, stripe_events[14:])
        github_api.send(f"{base}/webhooks/github", SECRET, github_events[14:])

        reports = _reports(_catch_up(config, env))

        assert (reports["stripe"]["new"], reports["github"]["new"]) == (8, 8)
        assert reports["stripe"]["complete"] and reports["github"]["complete"]
        wanted = {f"stripe {e.id}" for e in stripe_events}
        wanted |= {f"github {e.guid}" for e in github_events}
        wait_until(lambda: set(_calls(calls)) >= wanted, 60, "every event handled")

        again = _reports(_catch_up(config, env))
        assert (again["stripe"]["new"], again["github"]["new"]) == (0, 0)
        traced = run_hookinbox(config, "trace", stripe_events[8].id, "--json")
        assert traced.returncode == 0, traced.stderr
        assert json.loads(traced.stdout)["deliveries"][0]["journal"]["origin"] == "catch_up"
        assert "origin=catch_up" in run_hookinbox(config, "trace", github_events[9].guid).stdout
    finally:
        server.stop()
    counted = _calls(calls)
    assert set(counted) == wanted  # 0 missing
    assert set(counted.values()) == {1}  # 0 processed twice


def test_two_catch_up_processes_at_once_reserve_every_event_once(
    db_url: str, tmp_path: Path, providers: tuple[StripeStandIn, GitHubStandIn]
) -> None:
    stripe_api, github_api = providers
    calls = tmp_path / "calls.txt"
    config = _config(
        tmp_path / "hookinbox.toml", db_url, free_port(), stripe_api.url, github_api.url
    )
    env = _env(stripe_api, github_api, calls)
    assert run_hookinbox(config, "migrate", "--create").returncode == 0
    down = f"http://127.0.0.1:{free_port()}/webhooks"
    stripe_api.send(f"{down}/stripe", SECRET, stripe_api.add(30))
    github_api.send(f"{down}/github", SECRET, github_api.add(30))
    command = [sys.executable, "-m", "hookinbox.cli", "catch-up", "--json"]
    command += ["--config", str(config)]

    both = [
        subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=90)[0] for proc in both]

    assert [proc.returncode for proc in both] == [0, 0]
    runs = [run for out in outputs for run in json.loads(out)]
    for source in ("stripe", "github"):
        assert sum(r["new"] for r in runs if r["source"] == source) == 30

    async def rows() -> dict[str, int]:
        store = open_store_for(db_url)
        await store.open()
        try:
            return await store.count_rows()
        finally:
            await store.close()

    counted = asyncio.run(rows())
    assert (counted["deliveries"], counted["jobs"]) == (60, 60)  # nothing queued twice


def test_a_refused_key_is_one_line_with_its_code_and_exit_7(
    db_url: str, tmp_path: Path, providers: tuple[StripeStandIn, GitHubStandIn]
) -> None:
    stripe_api, github_api = providers
    config = _config(
        tmp_path / "hookinbox.toml", db_url, free_port(), stripe_api.url, github_api.url
    )
    env = _env(stripe_api, github_api, tmp_path / "calls.txt")
    env["HB_STRIPE_KEY"] = "sk_test_not_the_right_key_at_all"
    assert run_hookinbox(config, "migrate", "--create").returncode == 0
    stripe_api.add(2)

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hookinbox.cli",
            "catch-up",
            "--source",
            "stripe",
            "--config",
            str(config),
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 7
    assert done.stderr.strip().startswith("hookinbox: catch_up_unauthorized: ")
    assert "sk_test_not_the_right_key" not in done.stderr + done.stdout
