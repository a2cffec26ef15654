"""Fixtures of the verifier tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from verify_helpers import MakeVerifier, source

from hookinbox.verify.base import Verifier
from hookinbox.verify.registry import SCHEMES


@pytest.fixture
def make_verifier() -> MakeVerifier:
    """``make_verifier(scheme, secrets, **source_options)``: the registry's factory.

    Secrets are passed as a list, not through the environment, because a documented
    example secret may hold spaces (GitHub's does) and the variable is space-separated.
    """

    def make(scheme: str, secrets: Sequence[str], **options: Any) -> Verifier:
        return SCHEMES[scheme].verifier(source(scheme, **options), secrets)

    return make
