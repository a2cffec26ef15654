"""Helpers for the verifier tests: sources built from config, secrets through the env."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hookinbox.config import Source
from hookinbox.verify.base import Signer, Verifier
from hookinbox.verify.registry import build_signer

VECTORS = Path(__file__).resolve().parent.parent / "vectors"
SECRET_ENV = "HOOKINBOX_TEST_VERIFY_SECRET"

MakeVerifier = Callable[..., Verifier]


def load_vectors(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((VECTORS / f"{name}.json").read_text())
    return data


def source(scheme: str, **options: Any) -> Source:
    return Source.model_validate({"scheme": scheme, "secret_env": SECRET_ENV, **options})


def make_signer(scheme: str, secret: str, **options: Any) -> Signer:
    return build_signer("test", source(scheme, **options), secret)
