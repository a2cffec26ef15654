"""The public surface is what ``hookinbox.__all__`` says, sorted, and nothing moves out
of it by accident (httpx checks its own the same way)."""

from __future__ import annotations

import subprocess
import sys

import hookinbox
from hookinbox import errors

PUBLIC = [
    "ActionError",
    "Config",
    "ConfigError",
    "Event",
    "HookinboxError",
    "Inbox",
    "JobContext",
    "NotFound",
    "OperationRefused",
    "PayloadInvalid",
    "StoreUnavailable",
    "SyncJobContext",
    "load_config",
]


def test_the_public_names_are_exactly_these_and_sorted() -> None:
    assert hookinbox.__all__ == PUBLIC
    assert sorted(hookinbox.__all__) == hookinbox.__all__
    for name in PUBLIC:
        assert getattr(hookinbox, name) is not None


def test_the_public_names_are_the_objects_of_their_modules_and_imported_when_asked() -> None:
    """A process that imports one module of the package (a handler's, the command
    line's) does not import the app; ``from hookinbox import Inbox`` still gives it."""
    from hookinbox.app import Inbox
    from hookinbox.work.effects import JobContext

    assert hookinbox.Inbox is Inbox and hookinbox.JobContext is JobContext
    assert set(PUBLIC) <= set(dir(hookinbox))
    probe = (
        "import sys, hookinbox.errors; before = 'hookinbox.app' in sys.modules; "
        "from hookinbox import Inbox; print(before, Inbox.__module__)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert (done.returncode, done.stdout.split()) == (0, ["False", "hookinbox.app"]), done.stderr
    try:
        hookinbox.Missing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "Missing" in str(exc)
    else:
        raise AssertionError("an unknown name was found")


def test_the_public_modules_list_their_names_sorted() -> None:
    from hookinbox import asgi, testing

    assert testing.__all__ == ["InboxTest", "OutboxCapture", "SignedRequest", "signed_request"]
    assert asgi.__all__ == ["mount"]
    for module in (testing, asgi):
        assert sorted(module.__all__) == module.__all__


def test_every_public_error_has_a_stable_code_under_the_one_root() -> None:
    public_errors = [
        getattr(hookinbox, n)
        for n in PUBLIC
        if n.endswith("Error")
        or n
        in (
            "NotFound",
            "OperationRefused",
            "StoreUnavailable",
        )
    ]
    for error in public_errors:
        assert issubclass(error, hookinbox.HookinboxError)
        assert error.__module__ == errors.__name__
    assert hookinbox.ActionError("crm_unavailable").code == "crm_unavailable"
    assert hookinbox.StoreUnavailable().code == "store_unavailable"
