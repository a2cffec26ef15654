"""Driver errors become the store's, where they happen: "cannot be had right now" is
StoreUnavailable (the webhook answers ``store_unavailable``), anything else StoreError.

PostgreSQL shutting a session down (57P01) used to surface as ``store_error``; these unit
tests pin the mapping of the PostgreSQL driver (a unit below the store's contract)."""

from __future__ import annotations

import asyncpg
import pytest

from hookinbox.errors import StoreError, StoreUnavailable
from hookinbox.store.postgres.driver import store_error


@pytest.mark.parametrize(
    "error",
    [
        asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator"),
        asyncpg.exceptions.CrashShutdownError("crash"),
        asyncpg.exceptions.CannotConnectNowError("starting up"),
        asyncpg.exceptions.ConnectionDoesNotExistError("gone"),
        asyncpg.exceptions.ConnectionFailureError("broken"),
        asyncpg.exceptions.TooManyConnectionsError("too many"),
        asyncpg.exceptions.ObjectNotInPrerequisiteStateError("not ready"),
        asyncpg.exceptions.InterfaceError("connection is closed"),
        asyncpg.exceptions.InternalClientError("protocol state"),
        ConnectionResetError("reset"),
        TimeoutError(),
    ],
    ids=lambda e: type(e).__name__,
)
def test_unavailable_database_errors(error: BaseException) -> None:
    mapped = store_error(error)
    assert type(mapped) is StoreUnavailable
    assert mapped.code == "store_unavailable" and mapped.http_status == 503


@pytest.mark.parametrize(
    "error",
    [
        asyncpg.exceptions.UniqueViolationError("duplicate key"),
        asyncpg.exceptions.CharacterNotInRepertoireError("bad byte"),
        asyncpg.exceptions.UndefinedTableError("no table"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_other_database_errors(error: BaseException) -> None:
    mapped = store_error(error)
    assert type(mapped) is StoreError and mapped.code == "store_error"
    assert mapped.http_status == 503
