"""Every command of README.md and docs/quickstart.md, run as written, after ``make run``.

The commands are read from the markdown itself, so a page that drifts from the code fails
here. A ```` ```sh ```` block holds commands to paste: ``make run`` is started for real
(the whole demo: store, forward target, serve with admin and API), ``make demo`` is run,
and every other line is pasted into ``make shell`` against that demo; the lines under
docs/quickstart.md's "Installed" heading run in a directory of their own, with the page's
config as ``hookinbox.toml``. A ```` ```text ```` block is a synopsis (``[--flag V]``,
``PLACEHOLDER``): each command in it must exist with every option it names.

The one change made to what the pages say: the demo's ports (8080, 9000) are moved to
free ones, in the copied config and in the commands, so that runs on one machine do not
collide. ``pip install hookinbox`` is not run (the package is what this test runs).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import httpx
import pytest

from hookinbox.cli.main import main as cli_main
from tests.support.configs import quickstart_environment
from tests.support.processes import REPO, free_port, hookinbox_env, wait_until

PAGES = (REPO / "README.md", REPO / "docs" / "quickstart.md")
#: Targets of the Makefile that are the suite or the site itself: their recipes are
#: checked to exist (``make -n``), not run from inside the suite.
NOT_RUN_HERE = {"test", "lint", "docs", "examples", "bench", "chaos", "fmt"}


@dataclass(frozen=True)
class Block:
    page: str
    heading: str
    lang: str
    lines: tuple[str, ...]


def blocks() -> list[Block]:
    found: list[Block] = []
    for page in PAGES:
        heading, fence, lang, lines = "", False, "", []
        for line in page.read_text().splitlines():
            if not fence and line.startswith("#") and not line.startswith("#!"):
                heading = line.lstrip("# ").strip()
            elif line.startswith("```"):
                if fence:
                    found.append(Block(page.name, heading, lang, tuple(lines)))
                    fence, lines = False, []
                else:
                    fence, lang = True, line[3:].strip()
            elif fence:
                lines.append(line)
        assert not fence, f"{page.name}: a code block is not closed"
    return found


def commands(lang: str) -> list[tuple[Block, str]]:
    return [
        (block, line.strip())
        for block in blocks()
        if block.lang == lang
        for line in block.lines
        if line.strip() and not line.strip().startswith("#")
    ]


def test_the_pages_have_commands_of_each_kind() -> None:
    """The reading below finds what it runs: a page restructured past it fails here."""
    pasted = [line for _, line in commands("sh")]
    assert "make run" in " ".join(pasted) and "make shell" in " ".join(pasted)
    assert sum(line.startswith("hookinbox ") for line in pasted) >= 10
    assert sum(line.startswith("hookinbox ") for _, line in commands("text")) >= 20


# -- synopses --------------------------------------------------------------------------
def synopsis_problems(line: str) -> list[str]:
    """What in one synopsis line the CLI does not have: a command, or an option of it."""
    words = line.split("#", 1)[0].split()[1:]
    group: click.Group = cli_main
    command: click.Command = cli_main
    problems: list[str] = []
    after_bar = False
    for word in words:
        bare = word.strip("[]()'\"")
        if word == "|" or not bare:
            after_bar = word == "|"
            continue
        if isinstance(command, click.Group) and bare in command.commands:
            group, command = command, command.commands[bare]
        elif after_bar and re.fullmatch(r"[a-z][a-z-]*", bare):
            if bare not in group.commands:  # `sources list | pause NAME`
                problems.append(f"{group.name} has no command {bare!r}")
            else:
                command = group.commands[bare]
        elif bare.startswith("--"):
            flag = bare.split("=", 1)[0]
            names = {opt for param in command.params for opt in param.opts}
            if flag not in names | {"--help"}:
                problems.append(f"{command.name} has no {flag}")
        elif isinstance(command, click.Group):
            problems.append(f"{command.name} has no command {bare!r}")
        after_bar = False
    return problems


@pytest.mark.parametrize(
    "line",
    [line for _, line in commands("text") if line.startswith("hookinbox ")],
)
def test_each_synopsis_names_commands_and_options_that_exist(line: str) -> None:
    assert synopsis_problems(line) == []


def test_a_synopsis_with_a_flag_the_cli_lacks_is_found() -> None:
    assert synopsis_problems("hookinbox dlq list [--sourc S]") == ["list has no --sourc"]
    assert synopsis_problems("hookinbox sources list | paws NAME") == [
        "sources has no command 'paws'"
    ]


# -- the demo and the commands pasted against it ----------------------------------------
@dataclass
class Demo:
    port: int
    target_port: int
    env: dict[str, str]

    def moved(self, line: str) -> str:
        return line.replace("127.0.0.1:8080", f"127.0.0.1:{self.port}")

    def make(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["make", "--no-print-directory", "-C", str(REPO), *args],
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=240,
        )


def demo_config(tmp_path: Path, port: int, target_port: int) -> Path:
    text = (REPO / "examples" / "quickstart.toml").read_text()
    text, bound = re.subn(r"^port = 8080$", f"port = {port}", text, flags=re.M)
    text = text.replace("127.0.0.1:8080", f"127.0.0.1:{port}")
    text = text.replace("127.0.0.1:9000", f"127.0.0.1:{target_port}")
    assert bound == 1
    path = tmp_path / "quickstart.toml"
    path.write_text(text)
    return path


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    """``make run``, as a newcomer types it, on free ports; stopped by its process group."""
    port, target_port = free_port(), free_port()
    config = demo_config(tmp_path, port, target_port)
    env = hookinbox_env(
        {"DEMO_CONFIG": str(config), "DEMO_TARGET_PORT": str(target_port), "SHELL": "/bin/bash"}
    )
    env.pop("HOOKINBOX_CONFIG", None)
    log = (tmp_path / "run.log").open("w")
    run = subprocess.Popen(
        ["make", "--no-print-directory", "-C", str(REPO), "run", f"DEMO_CONFIG={config}"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_until(
            lambda: (
                run.poll() is not None
                or "quickstart is running" in (tmp_path / "run.log").read_text()
            ),
            60,
            "make run to print its banner",
        )
        assert run.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
        yield Demo(port, target_port, env)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGTERM)
            run.wait(timeout=30)
        log.close()


def pasted(demo: Demo, lines: list[str]) -> list[tuple[str, int, str]]:
    """Each line pasted into ``make shell``: (line, exit status, its output)."""
    script = "".join(f'{demo.moved(line)}\necho "__exit_{n}=$?"\n' for n, line in enumerate(lines))
    done = demo.make("shell", stdin=script)
    assert done.returncode == 0, done.stderr
    results, output = [], done.stdout
    for n, line in enumerate(lines):
        before, marker, output = output.partition(f"__exit_{n}=")
        assert marker, (line, done.stdout, done.stderr)
        status, _, output = output.partition("\n")
        results.append((line, int(status), before))
    return results


@pytest.mark.slow
def test_make_run_then_every_command_of_the_pages_works_as_written(
    demo: Demo, tmp_path: Path
) -> None:
    banner = (tmp_path / "run.log").read_text()
    for shown in ("/admin/", "/api/v1/", "/metrics", "DEMO", "demo-admin-token"):
        assert shown in banner, shown
    assert "serve_urls" in banner  # serve's own line with the URLs

    shell_lines: list[str] = []
    for block, line in commands("sh"):
        if block.heading == "Installed":
            continue
        words = line.split("#", 1)[0].split()
        if words[0] == "make":
            (target,) = words[1:]
            if target in ("run", "shell"):
                continue  # running: the fixture; shell: every line below goes through it
            if target in NOT_RUN_HERE:
                assert demo.make("-n", target).returncode == 0, target
                continue
            done = demo.make(target)
            assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
            continue
        if line not in shell_lines:  # a line on both pages proves nothing twice
            shell_lines.append(line)
    assert shell_lines
    for line, status, output in pasted(demo, shell_lines):
        assert status == 0, (line, output[-2000:])

    # What the demo is for: a forward that answered, and a dead letter to look at, over
    # the API with the demo's read token.
    token = quickstart_environment()["DEMO_READ_TOKEN"]
    base = f"http://127.0.0.1:{demo.port}"

    def dead_letters() -> list[dict[str, object]]:
        answer = httpx.get(
            f"{base}/api/v1/dead-letters", headers={"Authorization": f"Bearer {token}"}
        )
        assert answer.status_code == 200, answer.text
        return list(answer.json()["dead_letters"])

    wait_until(lambda: any(d["action"] == "billing" for d in dead_letters()), 20, "a dead letter")
    assert "demo target: POST /internal/openai -> 200" in (tmp_path / "run.log").read_text()
    assert httpx.get(f"{base}/admin/login").status_code == 200


@pytest.mark.slow
def test_the_installed_quickstart_works_as_written(tmp_path: Path) -> None:
    """docs/quickstart.md's "Installed": its config as hookinbox.toml, its commands in
    that directory, ``hookinbox serve`` in the background until the rest have run."""
    (config,) = [b for b in blocks() if b.heading == "Installed" and b.lang == "toml"]
    port = free_port()
    work = tmp_path / "installed"
    work.mkdir()
    (work / "hookinbox.toml").write_text("\n".join(config.lines) + f"\n[server]\nport = {port}\n")
    env = hookinbox_env({"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"})
    env.pop("HOOKINBOX_CONFIG", None)
    exports: list[str] = []
    servers: list[subprocess.Popen[bytes]] = []
    lines = [line for b, line in commands("sh") if b.heading == "Installed"]
    assert any(line.startswith("hookinbox serve") for line in lines)
    try:
        for line in lines:
            if line.startswith("pip install"):
                continue
            if line.startswith("export "):
                exports.append(line)
                continue
            prefix = "".join(f"{e}\n" for e in exports)
            if line.startswith(("hookinbox serve", "hookinbox worker")):
                servers.append(in_background(f"{prefix}exec {line}", work, env, port))
                continue
            done = subprocess.run(
                ["bash", "-c", prefix + line],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
    finally:
        for server in servers:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)


def in_background(
    script: str, work: Path, env: dict[str, str], port: int
) -> subprocess.Popen[bytes]:
    """A long-running line, started and waited for until it answers."""
    log = work / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            ["bash", "-c", script], cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT
        )

    def healthy() -> bool:
        assert server.poll() is None, log.read_text()
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(healthy, 30, "the quickstart's serve")
    return server
