"""SQLite: the embedded default, one file in WAL mode, nothing to install.

One thread owns the connection and runs every transaction start to finish, so the event
loop never blocks on SQLite, no other coroutine's statement can interleave inside a
transaction, and a receiver's batch of reservations is one commit, one fsync. Several
processes (``hookinbox serve`` plus ``hookinbox worker``) may share the file: writes take
SQLite's lock with ``BEGIN IMMEDIATE`` and wait for it up to ``busy_timeout``. Workers
of this process are woken right after a commit that queued jobs; other processes poll.
Times are REAL unix seconds from SQLite's own clock (:data:`~hookinbox.store.dialect.
SQLITE_NOW`), so every process of the host agrees on leases and due times.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from hookinbox.errors import StoreError, StoreNotFound, StoreUnavailable
from hookinbox.store.dialect import SQLITE, SQLITE_NOW
from hookinbox.store.driver import Driver, count_write
from hookinbox.store.migrations import load_migrations
from hookinbox.store.sql import Drive, Step, Tx, UniqueConflict

T = TypeVar("T")

#: How long a write waits for another process's lock before the receiver answers 503.
_BUSY_TIMEOUT_MS = 5_000


class _DatabaseThread:
    """Runs callables against one connection, in order, on one thread."""

    def __init__(self, path: str, busy_timeout_ms: int) -> None:
        self._path = path
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="hookinbox-sqlite", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise StoreUnavailable(f"cannot open SQLite database: {self._error}") from self._error

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        # FULL: a commit is on disk before the receiver answers 2xx, even on power loss.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def _run(self) -> None:
        try:
            conn = self._connect()
        except (sqlite3.Error, OSError) as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        while True:
            item = self._queue.get()
            if item is None:
                break
            fn, future, loop = item
            try:
                result = fn(conn)
            except BaseException as exc:
                if conn.in_transaction:
                    conn.rollback()
                loop.call_soon_threadsafe(_settle, future, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, future, result, None)
        conn.close()

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if not self._thread.is_alive():
            raise StoreUnavailable("the store is not open")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put((fn, future, loop))
        try:
            return await future
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(f"SQLite unavailable: {exc}") from exc
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite error: {type(exc).__name__}: {exc}") from exc
        except (UnicodeError, OverflowError) as exc:
            # A value sqlite3 cannot bind (a lone surrogate, an integer over 64 bits); its
            # message may quote the value, so only the class is kept.
            raise StoreError(f"SQLite cannot store a value: {type(exc).__name__}") from exc

    def stop(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout=10)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def parse_sqlite_url(url: str) -> tuple[str, int]:
    """``sqlite:///var/x.db`` is relative, ``sqlite:////tmp/x.db`` absolute; the query may
    set ``busy_timeout_ms`` (how long a write waits for another process's lock)."""
    path, _, query = url.removeprefix("sqlite://").removeprefix("/").partition("?")
    if not path:
        raise StoreError("the sqlite URL names no file")
    busy_timeout = _BUSY_TIMEOUT_MS
    for key, value in parse_qsl(query):
        if key != "busy_timeout_ms" or not value.isdigit():
            raise StoreError(f"unknown or invalid sqlite URL parameter {key!r}")
        busy_timeout = int(value)
    return path, busy_timeout


_CONVERTED = frozenset((datetime, list, tuple))


def _bind(params: Mapping[str, Any]) -> Mapping[str, Any]:
    """Times as REAL unix seconds, lists as one JSON text (read with ``json_each``)."""
    for value in params.values():
        if type(value) in _CONVERTED:
            break
    else:
        return params  # the common case, on every statement of the hot path
    bound = dict(params)
    for key, value in bound.items():
        if isinstance(value, datetime):
            bound[key] = value.timestamp()
        elif isinstance(value, list | tuple):
            bound[key] = json.dumps(list(value))
    return bound


class SQLiteDriver(Driver):
    dialect = SQLITE
    migrations = "hookinbox.store.sqlite"

    def __init__(self, url: str) -> None:
        self.url = url
        self._db = _DatabaseThread(*parse_sqlite_url(url))
        self._wakeup: asyncio.Event | None = None

    def decode_time(self, value: Any) -> datetime | None:
        return datetime.fromtimestamp(value, UTC) if value is not None else None

    def rejects_row(self, exc: BaseException) -> bool:
        """A value sqlite3 cannot bind, or one a constraint refuses."""
        refused = (UnicodeError, OverflowError, sqlite3.DataError, sqlite3.IntegrityError)
        return isinstance(exc, StoreError) and isinstance(exc.__cause__, refused)

    async def open(self, *, create: bool = True, make_dirs: bool = False) -> None:
        path = self._db.path
        if not create and (path == ":memory:" or not await asyncio.to_thread(Path(path).is_file)):
            raise StoreNotFound(f"no SQLite store at {path!r}")
        if path != ":memory:":
            folder = Path(path).parent
            if make_dirs:
                await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
            elif not await asyncio.to_thread(folder.is_dir):
                # A mistyped path never makes a new, empty store somewhere new.
                raise StoreNotFound(
                    f"no directory {str(folder)!r} for the SQLite store"
                    " (`hookinbox migrate --create` makes it)"
                )
        self._wakeup = asyncio.Event()
        await asyncio.to_thread(self._db.start)

    async def close(self) -> None:
        await asyncio.to_thread(self._db.stop)

    async def has_schema(self) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
            ).fetchone()
            return found is not None

        return await self._db.run(run)

    async def migrate(self) -> list[str]:
        def run(conn: sqlite3.Connection) -> list[str]:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
                " name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            applied = []
            for migration in load_migrations(self.migrations, self.dialect):
                if migration.version in done:
                    continue
                # One script, one transaction: a second process racing us fails on the
                # schema_migrations key and rolls back everything it began.
                script = (
                    "BEGIN IMMEDIATE;\n"
                    f"INSERT INTO schema_migrations VALUES ({migration.version}, "
                    f"'{migration.name}', {SQLITE_NOW});\n{migration.sql}\nCOMMIT;"
                )
                try:
                    conn.executescript(script)
                except sqlite3.IntegrityError:
                    conn.rollback()
                    continue
                applied.append(migration.name)
            return applied

        return await self._db.run(run)

    async def ping(self) -> None:
        """Ready means able to commit: take the write lock and let it go (a read would
        succeed while another process holds the lock and every reservation fails)."""

        def run(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")

        await self._db.run(run)

    async def run(self, tx: Tx[T], *, atomic: bool = True) -> T:
        answer, woke, held = await self._db.run(lambda conn: self._drive(conn, tx, atomic))
        if woke and self._wakeup is not None:
            self._wakeup.set()
        if held:
            count_write(held)
        return answer

    def _drive(self, conn: sqlite3.Connection, tx: Tx[T], atomic: bool) -> tuple[T, bool, float]:
        """On the writer thread: the whole transaction, between BEGIN and COMMIT; the
        answer, whether to wake workers, and how long the write lock was held (from the
        grant of ``BEGIN IMMEDIATE``, after any wait for another process, to the commit)."""
        granted = 0.0
        if atomic:
            conn.execute("BEGIN IMMEDIATE")
            granted = time.perf_counter()
        run = Drive(tx)
        while not run.done:
            run.feed(self._execute(conn, run.step))
        if atomic:
            conn.execute("COMMIT")
            return run.answer, run.woke, time.perf_counter() - granted
        return run.answer, run.woke, 0.0

    def _execute(self, conn: sqlite3.Connection, step: Step) -> Any:
        if step.fetch == "wake":
            return None
        text = self.dialect.render(step.sql).text
        if step.fetch == "many":
            return conn.executemany(text, [_bind(params) for params in step.params]).rowcount
        try:
            cursor = conn.execute(text, _bind(step.params))
        except sqlite3.IntegrityError as exc:
            if step.unique_conflict and "UNIQUE" in str(exc):
                return UniqueConflict(str(exc))
            raise
        if step.fetch == "count":
            return cursor.rowcount
        found = cursor.fetchall()  # to the end: a RETURNING statement finishes its writes
        if step.fetch == "rows":
            return found
        first = found[0] if found else None
        return first if step.fetch == "row" or first is None else first[0]

    async def wait_for_jobs(self, timeout: float) -> None:
        if self._wakeup is None:
            await asyncio.sleep(timeout)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), timeout)
        self._wakeup.clear()
