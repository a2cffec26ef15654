"""examples/quickstart.toml: one source of each scheme, valid and buildable."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookinbox.config import load_config
from hookinbox.config.schemes import SCHEME_NAMES
from hookinbox.verify.registry import build_verifier

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quickstart.toml"


def test_every_scheme_has_an_example_source_that_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(EXAMPLE)
    for source in config.sources.values():
        secret = "whsec_a2V5a2V5a2V5a2V5" if source.scheme in ("standard-webhooks", "sdk") else "s"
        secret = "user:s" if source.scheme == "basic" else secret
        monkeypatch.setenv(source.secret_env, secret)
    for name, source in config.sources.items():
        build_verifier(name, source)
    assert {source.scheme for source in config.sources.values()} == set(SCHEME_NAMES)
