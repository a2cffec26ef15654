"""``hookinbox send`` against a real ``hookinbox serve`` running the quickstart config (one
source of each scheme), on both stores: every source accepts what ``send`` builds for it, a
repeat of an id is the same bytes (a duplicate, never a conflict), other data under the
same id is a conflict, and an unreachable server is a non-zero exit."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.support.configs import quickstart_environment
from tests.support.processes import REPO, HookinboxProcess, free_port, hookinbox_env
from tests.support.target import RecordingTarget

QUICKSTART = REPO / "examples" / "quickstart.toml"
DEMO_SECRETS = quickstart_environment()
#: An event type each provider really sends.
TYPES = {
    "openai": "response.completed",
    "stripe": "invoice.paid",
    "github": "push",
    "shopify": "orders/create",
    "slack": "app_mention",
    "video": "completed",
    "openai-sdk": "response.completed",
    "twilio": "delivered",
    "partner": "order.paid",
    "legacy": "order.paid",
    "mux": "video.asset.ready",
}


def quickstart_sources() -> list[str]:
    return list(tomllib.loads(QUICKSTART.read_text())["sources"])


def quickstart_config(tmp_path: Path, db_url: str, port: int) -> Path:
    """examples/quickstart.toml as it is, on the test's database and port."""
    text, found = re.subn(
        r"^database = .*$", f"database = {json.dumps(db_url)}", QUICKSTART.read_text(), flags=re.M
    )
    text, bound = re.subn(r"^port = \d+$", f"port = {port}", text, flags=re.M)
    assert (found, bound) == (1, 1)
    path = tmp_path / "quickstart.toml"
    path.write_text(text)
    return path


def hookinbox(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookinbox.cli", *args, "--config", str(config)],
        env=hookinbox_env(DEMO_SECRETS),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def send(config: Path, source: str, *args: str) -> dict[str, Any]:
    done = hookinbox(config, "send", "--source", source, "--json", *args)
    assert done.returncode == 0, (source, done.stdout, done.stderr)
    (answer,) = [json.loads(line) for line in done.stdout.splitlines()]
    return dict(answer)


def test_every_scheme_of_the_quickstart_has_a_type() -> None:
    assert set(quickstart_sources()) == set(TYPES)


@pytest.mark.slow
def test_send_is_accepted_by_every_quickstart_source_and_a_repeat_is_a_duplicate(
    db_url: str, tmp_path: Path
) -> None:
    port = free_port()
    config = quickstart_config(tmp_path, db_url, port)
    server = HookinboxProcess(
        ["serve", "--config", str(config)], hookinbox_env(DEMO_SECRETS), tmp_path / "serve.log"
    ).start()
    try:
        server.wait_healthy(f"http://127.0.0.1:{port}")

        def one_source(source: str) -> list[dict[str, Any]]:
            args = ("--id", f"evt_send_{source}", "--type", TYPES[source])
            first = send(config, source, *args, "--data", '{"n": 1}')
            # A separate invocation, seconds later: the same bytes, as a provider's retry.
            again = send(config, source, *args, "--data", '{"n": 1}')
            changed = send(config, source, *args, "--data", '{"n": 2}')
            return [first, again, changed]

        with ThreadPoolExecutor(max_workers=len(TYPES)) as pool:
            answers = dict(zip(TYPES, pool.map(one_source, TYPES), strict=True))
        for source, (first, again, changed) in answers.items():
            assert (first["http_status"], first["status"]) == (200, "accepted"), (source, first)
            assert (again["status"], again.get("conflict")) == ("duplicate", None), (source, again)
            assert again["delivery_id"] == first["delivery_id"]
            assert (changed["status"], changed.get("conflict")) == ("duplicate", True), source

        # Slack's url_verification: answered with the challenge, nothing journaled.
        challenge = send(config, "slack", "--type", "url_verification", "--id", "chal_1")
        assert challenge == {"n": 1, "http_status": 200, "challenge": "chal_1"}

        listed = hookinbox(config, "deliveries", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        journal = {(d["source"], d["type"], d["delivery_count"]) for d in json.loads(listed.stdout)}
        assert journal == {(source, TYPES[source], 3) for source in TYPES}
        by_id = {d["source"]: d["event_id"] for d in json.loads(listed.stdout)}
        assert by_id["stripe"] == "evt_send_stripe" and by_id["github"] == "evt_send_github"
        assert by_id["video"].startswith("fp:")  # no id from the provider: a fingerprint
    finally:
        server.stop()


def test_send_to_a_server_that_is_not_there_exits_non_zero_naming_the_url(
    tmp_path: Path,
) -> None:
    config = quickstart_config(tmp_path, f"sqlite:///{tmp_path}/x.db", free_port())
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    done = hookinbox(config, "send", "--source", "stripe", "--url", url, "--repeat", "2")
    assert done.returncode == 1
    assert done.stdout.splitlines()[0].startswith("#1   0 connection failed")
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("hookinbox: connection_failed: 2 of 2 deliveries could not reach")
    assert f"{url}/webhooks/stripe" in line and "ConnectError" in line


def test_send_answered_other_than_2xx_exits_1_naming_the_first_answer(tmp_path: Path) -> None:
    """A refusal (4xx) or a failure (5xx) is the send not done: exit 1 and one line, as
    an unreachable server is. A tampered copy is sent to be refused for its signature, so
    there only a 400 is what was wanted."""
    config = quickstart_config(tmp_path, f"sqlite:///{tmp_path}/x.db", free_port())
    refused = (400, {}, b'{"error": "invalid_signature"}')
    accepted = (200, {}, b'{"status": "accepted", "delivery_id": "dlv_x"}')
    cases = [
        ([refused, 503], (), 1, "2 of 2 deliveries were answered other than 2xx (the first: "
         "400 invalid_signature)"),
        ([200, 503], (), 1, "1 of 2 deliveries were answered other than 2xx (the first: 503)"),
        ([accepted], ("--tamper",), 1, "2 of 2 tampered deliveries were answered other than "
         "400, the signature's refusal (the first: 200 accepted)"),
        ([accepted, accepted], (), 0, ""),
        ([refused, refused], ("--tamper",), 0, ""),
    ]  # fmt: skip
    for statuses, args, exit_code, says in cases:
        with RecordingTarget(list(statuses)) as target:
            url = target.url.removesuffix("/internal/hooks")
            done = hookinbox(
                config, "send", "--source", "stripe", "--url", url, "--repeat", "2", *args
            )
        assert done.returncode == exit_code, (statuses, args, done.stderr)
        assert len(done.stdout.splitlines()) == 2, done.stdout  # each answer is shown
        if says:
            (line,) = done.stderr.splitlines()
            assert line == f"hookinbox: unexpected_answer: {says}", line
        else:
            assert done.stderr == ""


def test_send_with_an_empty_or_unknown_scheme_is_refused_naming_the_option(
    tmp_path: Path,
) -> None:
    """``--scheme`` is the command line's own: a slip in it (an unset shell variable, a
    typo) is a bad argument, not a fault of the source's configured scheme."""
    config = quickstart_config(tmp_path, f"sqlite:///{tmp_path}/x.db", free_port())
    url = f"http://127.0.0.1:{free_port()}"  # never reached: refused before sending
    cases = {
        "": "Invalid value for '--scheme': empty: give a value or leave the option out",
        " ": "Invalid value for '--scheme': empty: give a value or leave the option out",
        "strpe": "--scheme: unknown scheme 'strpe' (known: api-key, basic, github, hmac, "
        "sdk, shopify, slack, standard-webhooks, stripe, twilio)",
    }
    for scheme, says in cases.items():
        done = hookinbox(config, "send", "--source", "stripe", "--url", url, "--scheme", scheme)
        assert (done.returncode, done.stdout) == (2, ""), (scheme, done.stdout, done.stderr)
        (line,) = done.stderr.splitlines()
        assert line.startswith(f"hookinbox: invalid_argument: {says}"), (scheme, line)


def test_send_with_an_empty_type_is_refused_naming_the_option(tmp_path: Path) -> None:
    """An empty type (often an unset shell variable) would send events whose type is
    empty; left out, ``--type`` is ``test.event``."""
    config = quickstart_config(tmp_path, f"sqlite:///{tmp_path}/x.db", free_port())
    url = f"http://127.0.0.1:{free_port()}"  # never reached: refused before sending
    for event_type in ("", " "):
        done = hookinbox(config, "send", "--source", "stripe", "--url", url, "--type", event_type)
        assert (done.returncode, done.stdout) == (2, ""), (event_type, done.stdout, done.stderr)
        (line,) = done.stderr.splitlines()
        assert line.startswith(
            "hookinbox: invalid_argument: Invalid value for '--type': empty: "
        ), (event_type, line)


def test_send_with_a_type_or_id_no_event_could_carry_is_refused_naming_the_option(
    tmp_path: Path,
) -> None:
    """A line break in a type or an id would be refused by the server, or cut the header
    that carries it for GitHub or Shopify; 256 bytes are more than the receiver stores."""
    config = quickstart_config(tmp_path, f"sqlite:///{tmp_path}/x.db", free_port())
    url = f"http://127.0.0.1:{free_port()}"  # never reached: refused before sending
    for option, value in (("--type", "a\nb"), ("--type", "x" * 256), ("--id", "evt\r1")):
        done = hookinbox(config, "send", "--source", "stripe", "--url", url, option, value)
        assert (done.returncode, done.stdout) == (2, ""), (option, done.stdout, done.stderr)
        (line,) = done.stderr.splitlines()
        assert line.startswith(
            f"hookinbox: invalid_argument: Invalid value for '{option}': not printable text"
        ), (option, line)
