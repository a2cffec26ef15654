"""The package as a user gets it: ``python -m build`` makes an sdist and, from it, a wheel;
the wheel goes into a fresh virtualenv (its dependencies from the package index, as
``pip install hookinbox`` would), and the installed command shows its version, migrates
a store and answers a signed delivery. Missing package data (migrations, templates) or a
missing dependency fails here, not on a user's machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookinbox.version import __version__
from tests.support.processes import REPO, free_port
from tests.support.signing import SECRET, SECRET_ENV, delivery

pytestmark = pytest.mark.slow


def _run(args: list[str], *, timeout: float, **kw: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done


def _clean_env(**extra: str) -> dict[str, str]:
    """No PYTHONPATH and no virtualenv of ours: only what the fresh venv installed."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def test_the_built_wheel_installs_and_serves(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(REPO)], timeout=120)
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    assert wheel.name == f"hookinbox-{__version__}-py3-none-any.whl"
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    assert f"hookinbox-{__version__}/CHANGELOG.md" in names
    with zipfile.ZipFile(wheel) as archive:
        assert "hookinbox/py.typed" in archive.namelist()

    # A venv without its own pip (ensurepip is slow); our pip installs into it. No
    # byte-compiling: it is the slowest part of the install and proves nothing here.
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=60)
    bin_dir = venv / "bin"
    env = _clean_env()
    install = ["install", "--quiet", "--no-compile", str(wheel)]
    pip = [sys.executable, "-m", "pip", "--python", str(bin_dir / "python")]
    _run([*pip, *install], timeout=180, env=env)
    where = _run(
        [str(bin_dir / "python"), "-c", "import hookinbox; print(hookinbox.__file__)"],
        # The first import compiles every module of the package and its dependencies
        # (installed --no-compile): tens of seconds on a loaded 2-core machine.
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert where.stdout.strip().startswith(str(venv))

    hookinbox = str(bin_dir / "hookinbox")
    shown = _run([hookinbox, "--version"], timeout=60, env=env, cwd=tmp_path)
    assert shown.stdout.strip() == f"hookinbox, version {__version__}"

    port = free_port()
    config = tmp_path / "hookinbox.toml"
    config.write_text(
        f'database = "sqlite:///{tmp_path}/hookinbox.db"\n'
        f'[server]\nhost = "127.0.0.1"\nport = {port}\n'
        f'[sources.test]\nscheme = "standard-webhooks"\nsecret_env = "{SECRET_ENV}"\n'
        '[[sources.test.routes]]\nevents = ["*"]\naction = "log"\n'
        'handler = "hookinbox.examples:log_event"\n'
    )
    migrated = _run([hookinbox, "migrate", "--config", str(config)], timeout=60, env=env)
    assert migrated.stdout.startswith("applied: ")

    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        [hookinbox, "serve", "--config", str(config)],
        env=_clean_env(**{SECRET_ENV: SECRET}),
        cwd=tmp_path,
        stdout=log,
        stderr=log,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "hookinbox serve never became ready"
            time.sleep(0.1)
        body, headers = delivery("evt_from_the_wheel")
        answer = httpx.post(f"{base}/webhooks/test", content=body, headers=headers, timeout=10)
        assert (answer.status_code, answer.json()["status"]) == (200, "accepted")
        metrics = httpx.get(f"{base}/metrics", timeout=10).text
        assert f'version="{__version__}"' in metrics
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=5)
        log.close()
