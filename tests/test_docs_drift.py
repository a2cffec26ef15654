"""The lists the documentation repeats from the code, checked against the code: the
refusal codes of a webhook, the schemes a source takes, the kinds of notice."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from hookinbox import errors
from hookinbox.config.notify import NOTICE_KINDS
from hookinbox.config.schemes import SCHEME_NAMES

REPO = Path(__file__).resolve().parents[1]


def refusal_codes() -> set[str]:
    """Every code a webhook delivery is refused with as 400: the verification errors."""
    found, todo = set(), [errors.VerificationError]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls is not errors.VerificationError:
            found.add(cls.code)
    return found


@pytest.mark.parametrize("page", ["README.md", "docs/reference/http.md"])
def test_each_page_lists_every_refusal_code_of_a_webhook(page: str) -> None:
    (row,) = [
        line for line in (REPO / page).read_text().splitlines() if line.startswith("| bad delivery")
    ]
    named = set(re.findall(r"`([a-z_]+)`", row)) - set(SCHEME_NAMES)
    assert named == refusal_codes()


def test_the_configuration_reference_lists_every_scheme() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import docs_reference
    finally:
        sys.path.remove(str(REPO / "scripts"))
    (row,) = [
        line
        for line in docs_reference.configuration_page().splitlines()
        if line.startswith("| `scheme` |")
    ]
    assert set(re.findall(r"`([a-z-]+)`", row)) - {"scheme"} == set(SCHEME_NAMES)


def test_the_notifications_page_describes_every_kind_of_notice() -> None:
    text = (REPO / "docs" / "operations" / "notifications.md").read_text()
    rows = re.findall(r"^\| `([a-z_]+)` \| (.*)$", text, flags=re.M)
    assert [kind for kind, _ in rows] == list(NOTICE_KINDS)
    for kind, rest in rows:
        assert "lands" not in rest and "once the" not in rest, (kind, "a promise, not a fact")
