"""PostgreSQL: the production driver and the scale-out path.

Any number of receiver and worker processes share one database through an asyncpg pool.
A transaction runs on one pooled connection inside ``conn.transaction()``; the hot path
is one statement per operation (:mod:`hookinbox.store.hot_path_postgres`, which this
driver knows nothing of). Workers are
woken by LISTEN/NOTIFY (``pg_notify`` inside the committing statement or transaction)
and poll only as a fallback. The database clock (``now()``) sets every lease and due time.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

import asyncpg
import orjson

from hookinbox.errors import StoreError, StoreNotFound, StoreUnavailable
from hookinbox.store.dialect import POSTGRES
from hookinbox.store.driver import Driver
from hookinbox.store.migrations import load_migrations
from hookinbox.store.sql import Drive, Row, Sql, Step, Tx, UniqueConflict

T = TypeVar("T")

_CONNECT_TIMEOUT = 5.0
_COMMAND_TIMEOUT = 30.0
#: A migration's step may scan a large table (a constraint's VALIDATE): no 30 s limit.
_MIGRATION_TIMEOUT = 6 * 3600.0
#: Seconds a prepared statement lives on a connection before it is prepared again.
#: PostgreSQL settles on a generic plan after five executions and keeps it until the
#: table's statistics change: a plan made while ``deliveries`` was nearly empty (a new
#: store, with no autoanalyze to invalidate it) scans the table for every duplicate.
#: Preparing again replans with the table's present size; it costs a few milliseconds
#: per statement and connection per lifetime.
_STATEMENT_LIFETIME = 5
#: Connections of the pool for :meth:`PostgresDriver.rows_planned_once` (a worker runs one
#: loop turn's statement at a time, and a claim or a settle beside it).
_PLANNED_ONCE_POOL = 4
#: The channel workers LISTEN on; the hot path's reservation notifies it in its statement
#: (``postgres/hot_path.sql``), a transaction that asks for :data:`~hookinbox.store.sql.
#: WAKE` with this statement.
NOTIFY_CHANNEL = "hookinbox_jobs"
_NOTIFY = "SELECT pg_notify('hookinbox_jobs', '')"
#: The line that ends one step of a migration and commits it (:meth:`PostgresDriver.migrate`).
_MIGRATION_STEP = re.compile(r"^-- hookinbox: commit[ \t]*$", re.MULTILINE)
#: Connections :meth:`PostgresDriver.run_held` keeps out of the pool between calls: as
#: many as the receiver has reservation batches in flight by default.
HELD_CONNECTIONS = 4

#: Errors that mean "the database cannot be had right now" (retry later), not "this
#: statement is wrong": the client's own (a closed or broken connection, a timeout), and
#: the server's connection exceptions (class 08), shutdowns (57P01-57P03), too many
#: connections (53300) and objects not in the required state (55000).
_UNAVAILABLE = (OSError, TimeoutError, asyncpg.InterfaceError, asyncpg.InternalClientError)
_UNAVAILABLE_STATES = ("57P01", "57P02", "57P03", "53300", "55000")


def store_error(exc: BaseException) -> StoreError:
    """The store's error for a driver error (raised ``from`` it by the caller)."""
    if isinstance(exc, asyncpg.PostgresError):
        state = exc.sqlstate or ""
        if state.startswith("08") or state in _UNAVAILABLE_STATES:
            return StoreUnavailable(f"PostgreSQL unavailable: {type(exc).__name__}")
        return StoreError(f"PostgreSQL error {state}: {type(exc).__name__}")
    return StoreUnavailable(f"PostgreSQL unavailable: {type(exc).__name__}")


def connect_error(exc: BaseException, url: str) -> StoreError:
    """Why no connection could be made, in words an operator acts on, with the address
    tried: the server's own refusal (it names the role or the database, never a
    password), or what stopped the connection before a server answered. Never the URL,
    which may hold the password; an error of the client's own is named by its class."""
    where = _address(url)
    if isinstance(exc, asyncpg.PostgresError):
        said = " ".join(str(getattr(exc, "message", "") or type(exc).__name__).split())
        if isinstance(exc, asyncpg.InvalidCatalogNameError):
            return StoreNotFound(f"no such PostgreSQL database at {where}: {said}")
        return StoreUnavailable(f"PostgreSQL at {where} refused the connection: {said}")
    if isinstance(exc, ConnectionRefusedError):
        why = "connection refused (is PostgreSQL running and listening there?)"
    elif isinstance(exc, socket.gaierror):
        why = "its host name does not resolve"
    elif isinstance(exc, TimeoutError):
        why = f"no answer within {_CONNECT_TIMEOUT:g} s"
    elif isinstance(exc, OSError) and exc.strerror:
        why = exc.strerror
    else:
        why = type(exc).__name__
    return StoreUnavailable(f"cannot connect to PostgreSQL at {where}: {why}")


def _address(url: str) -> str:
    """``host:port`` the URL names, libpq's defaults where it names none."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return "a malformed host or port"
    host = host or os.environ.get("PGHOST") or "localhost"
    shown = str(port) if port else os.environ.get("PGPORT") or "5432"
    return f"[{host}]:{shown}" if ":" in host else f"{host}:{shown}"


def _usable(conn: Any) -> bool:
    """Whether a pooled connection can still run statements: a connection the server
    ended is closed, or already taken back by its pool (its proxy then refuses calls)."""
    try:
        return not conn.is_closed()
    except asyncpg.InterfaceError:
        return False


async def _no_reset(connection: asyncpg.Connection) -> None:
    """Skip asyncpg's per-release reset: our connections carry no session state, and the
    reset is a round trip per request on the hot path."""


#: Every connection's session. No JIT: hookinbox's statements are short, and a search
#: with a payload filter is planned at millions of cost units (its JSON function's
#: declared cost, per row of the window), past ``jit_above_cost``: compiling it took
#: longer than the scan it sped up (0.4-0.7 s of a 1 s search over a million bodies).
#: Values too large for a row (a body over ~2 kB) compressed with lz4, not pglz, where the
#: server has it (PostgreSQL 14 and later, built with lz4; elsewhere the server's default
#: stays): the receive statement's CPU per delivery fell 89 -> 66 us at 3 kB bodies and
#: 115 -> 71 us at 9 kB (docs/performance.md, "Bodies apart, compressed with lz4").
_SESSION = (
    "SET jit = off; DO $$ BEGIN"
    " PERFORM set_config('default_toast_compression', 'lz4', false);"
    " EXCEPTION WHEN invalid_parameter_value OR undefined_object THEN NULL; END $$"
)


async def _session(connection: asyncpg.Connection) -> None:
    """A pooled connection's session: ``SET``, not startup parameters, which a connection
    pooler in between may refuse."""
    await connection.execute(_SESSION)


async def _plan_once(connection: asyncpg.Connection) -> None:
    """The session of a :meth:`PostgresDriver.rows_planned_once` connection."""
    await connection.execute(f"{_SESSION}; SET plan_cache_mode = force_generic_plan")


class PostgresDriver(Driver):
    dialect = POSTGRES
    migrations = "hookinbox.store.postgres"

    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        self.url = url
        self._pool_size = pool_size
        self._pool: asyncpg.Pool | None = None
        self._planned_once: asyncpg.Pool | None = None
        self._planned_once_lock = asyncio.Lock()
        self._listener: asyncpg.Connection | None = None
        #: A worker's lanes wait together: one of them opens the LISTEN connection.
        self._listen_lock = asyncio.Lock()
        self._wakeup = asyncio.Event()
        #: The connections :meth:`run_held` keeps between calls (taken from the pool).
        self._held: list[Any] = []
        self._closing = False

    def decode_time(self, value: Any) -> datetime | None:
        """asyncpg already answers a timestamptz as a UTC datetime."""
        return value  # type: ignore[no-any-return]

    # -- lifecycle ----------------------------------------------------------------------
    async def open(self, *, create: bool = True, make_dirs: bool = False) -> None:
        """Connecting never creates a PostgreSQL database, whatever ``create`` says."""
        self._closing = False
        try:
            self._pool = await asyncpg.create_pool(
                self.url,
                min_size=1,
                max_size=self._pool_size,
                timeout=_CONNECT_TIMEOUT,
                command_timeout=_COMMAND_TIMEOUT,
                reset=_no_reset,
                max_cached_statement_lifetime=_STATEMENT_LIFETIME,
                init=_session,
            )
        except (*_UNAVAILABLE, asyncpg.PostgresError) as exc:
            raise connect_error(exc, self.url) from exc

    async def close(self) -> None:
        if self._listener is not None:
            try:
                await asyncio.wait_for(self._listener.close(), 2)
            except (*_UNAVAILABLE, asyncpg.PostgresError, RuntimeError):
                self._listener.terminate()
            self._listener = None
        if self._pool is not None:
            self._closing = True
            held, self._held = self._held, []
            for conn in held:
                await self._give_back(conn)
        for pool in (self._planned_once, self._pool):
            if pool is not None:
                try:
                    await asyncio.wait_for(pool.close(), 5)
                except (*_UNAVAILABLE, asyncpg.PostgresError, RuntimeError):
                    pool.terminate()
        self._pool = self._planned_once = None
        self._closing = False

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[asyncpg.Connection]:
        if self._pool is None:
            raise StoreUnavailable("the store is not open")
        try:
            async with self._pool.acquire(timeout=_CONNECT_TIMEOUT) as conn:
                yield conn
        except (*_UNAVAILABLE, asyncpg.PostgresError) as exc:
            raise store_error(exc) from exc

    async def rows_planned_once(self, sql: Sql, **params: Any) -> list[Row]:
        """On connections of their own whose session plans every prepared statement once
        (``plan_cache_mode = force_generic_plan``; the pool opens at the first call, so a
        process that never claims holds none). PostgreSQL's default plans a statement
        again at every run while its custom plan looks cheaper than the generic one, and
        for the worker's turn (``LIMIT`` a parameter, which a generic plan must guess) it
        always does: a settle-and-claim of 32 jobs spent 0.75 ms of 2.3 planning, about
        a quarter of the backend's CPU per job. The plan is made again with the
        statement, every few seconds (``_STATEMENT_LIFETIME``), from the table's
        statistics of that moment."""
        pool = self._planned_once or await self._open_planned_once()
        rendered = self.dialect.render(sql)
        args = [params[name] for name in rendered.names]
        try:
            async with pool.acquire(timeout=_CONNECT_TIMEOUT) as conn:
                found: list[Row] = await conn.fetch(rendered.text, *args)
        except (*_UNAVAILABLE, asyncpg.PostgresError) as exc:
            raise store_error(exc) from exc
        return found

    async def _open_planned_once(self) -> asyncpg.Pool:
        if self._pool is None:
            raise StoreUnavailable("the store is not open")
        async with self._planned_once_lock:
            if self._planned_once is None:
                try:
                    self._planned_once = await asyncpg.create_pool(
                        self.url,
                        min_size=1,
                        max_size=_PLANNED_ONCE_POOL,
                        timeout=_CONNECT_TIMEOUT,
                        command_timeout=_COMMAND_TIMEOUT,
                        reset=_no_reset,
                        max_cached_statement_lifetime=_STATEMENT_LIFETIME,
                        init=_plan_once,
                    )
                except (*_UNAVAILABLE, asyncpg.PostgresError) as exc:
                    raise store_error(exc) from exc
            return self._planned_once

    async def has_schema(self) -> bool:
        async with self._conn() as conn:
            return bool(await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL"))

    async def migrate(self) -> list[str]:
        """Each migration in its own transaction, under a session lock (one migrator at a
        time). A migration may be cut into steps by a ``-- hookinbox: commit`` line, each
        step committed on its own: a step that scans a large table (a VALIDATE) then holds
        no lock that stops writers, and the version is recorded with the last step, so a
        migration stopped half-way runs again from its first step (its steps are written
        to be run again)."""
        applied: list[str] = []
        async with self._conn() as conn:
            await conn.execute("SELECT pg_advisory_lock(hashtext('hookinbox_migrate'))")
            try:
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations ("
                    " version integer PRIMARY KEY, name text NOT NULL,"
                    " applied_at timestamptz NOT NULL DEFAULT now())"
                )
                done = {
                    r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")
                }
                for migration in load_migrations(self.migrations, self.dialect):
                    if migration.version in done:
                        continue
                    *first, last = _MIGRATION_STEP.split(migration.sql)
                    for step in first:
                        async with conn.transaction():
                            await conn.execute(step, timeout=_MIGRATION_TIMEOUT)
                    async with conn.transaction():
                        await conn.execute(last, timeout=_MIGRATION_TIMEOUT)
                        await conn.execute(
                            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                            migration.version,
                            migration.name,
                        )
                    applied.append(migration.name)
            finally:
                await conn.execute("SELECT pg_advisory_unlock(hashtext('hookinbox_migrate'))")
        return applied

    async def ping(self) -> None:
        async with self._conn() as conn:
            await conn.fetchval("SELECT 1")

    # -- running statements ---------------------------------------------------------------
    async def run(self, tx: Tx[T], *, atomic: bool = True) -> T:
        async with self._conn() as conn:
            if not atomic:
                return await self._drive(conn, tx)
            async with conn.transaction():
                return await self._drive(conn, tx)

    async def run_held(self, tx: Tx[T]) -> T:
        """``run(tx, atomic=False)`` on a connection kept out of the pool between calls
        (at most :data:`HELD_CONNECTIONS`; one more call at once takes one from the pool
        and gives it back). The receiver reserves a batch every few milliseconds, and the
        pool's acquire and release (its queue, a timer, a shielded task) cost the client
        ~100 us of CPU, four times a short statement's own round trip. A connection an
        error went through goes back to the pool, which closes a broken one."""
        pool = self._pool
        if pool is None:
            raise StoreUnavailable("the store is not open")
        held = self._held
        conn = None
        while held and conn is None:
            conn = held.pop()
            if not _usable(conn):  # the server ended it meanwhile: the pool makes a new one
                await self._give_back(conn)
                conn = None
        try:
            if conn is None:
                conn = await pool.acquire(timeout=_CONNECT_TIMEOUT)
        except (*_UNAVAILABLE, asyncpg.PostgresError) as exc:
            raise store_error(exc) from exc
        try:
            answer = await self._drive(conn, tx)
        except BaseException as exc:
            if not isinstance(exc, (*_UNAVAILABLE, asyncpg.PostgresError)):
                await self._give_back(conn)
                raise
            error = store_error(exc)
            if isinstance(error, StoreUnavailable):
                await self._end_held(conn)
            else:
                await self._give_back(conn)
            raise error from exc
        if (
            self._pool is pool
            and not self._closing
            and len(held) < HELD_CONNECTIONS
            and _usable(conn)
        ):
            held.append(conn)
        else:
            await self._give_back(conn)
        return answer

    async def _end_held(self, failed: Any) -> None:
        """End the connection that failed and every kept one. The server ends kept
        connections together (a restart, a failover, an operator's terminate), and one it
        ended may not look closed yet: its farewell read, the end of its socket not yet,
        so the next call on it would fail as well. The pool opens fresh ones."""
        ended = [failed, *self._held]
        self._held.clear()  # in place: a call under way appends to this same list
        for conn in ended:
            with suppress(asyncpg.InterfaceError):  # already taken back by the pool
                conn.terminate()
            await self._give_back(conn)

    async def _give_back(self, conn: Any) -> None:
        """Release a connection to its pool (closed there if it is broken)."""
        if self._pool is None:
            with suppress(asyncpg.InterfaceError):
                conn.terminate()
            return
        try:
            await self._pool.release(conn)
        except (*_UNAVAILABLE, asyncpg.PostgresError, RuntimeError):
            with suppress(asyncpg.InterfaceError):  # already taken back by the pool
                conn.terminate()

    async def _drive(self, conn: asyncpg.Connection, tx: Tx[T]) -> T:
        run = Drive(tx)
        while not run.done:
            run.feed(await self._execute(conn, run.step))
        answer: T = run.answer
        return answer

    async def _execute(self, conn: asyncpg.Connection, step: Step) -> Any:
        if step.fetch == "wake":
            return await conn.fetchval(_NOTIFY)
        rendered = self.dialect.render(step.sql)
        if step.fetch == "many":
            await conn.executemany(
                rendered.text, [[p[name] for name in rendered.names] for p in step.params]
            )
            return None
        args = [step.params[name] for name in rendered.names]
        if step.unique_conflict:
            try:
                async with conn.transaction():  # a savepoint: only this statement is undone
                    return await self._fetch(conn, step, rendered.text, args)
            except asyncpg.UniqueViolationError as exc:
                return UniqueConflict(type(exc).__name__)
        return await self._fetch(conn, step, rendered.text, args)

    @staticmethod
    async def _fetch(conn: asyncpg.Connection, step: Step, text: str, args: list[Any]) -> Any:
        if step.fetch == "rows":
            return await conn.fetch(text, *args, timeout=step.timeout)
        if step.fetch == "row":
            return await conn.fetchrow(text, *args, timeout=step.timeout)
        if step.fetch == "value":
            return await conn.fetchval(text, *args, timeout=step.timeout)
        status: str = await conn.execute(text, *args, timeout=step.timeout)
        return int(status.rsplit(" ", 1)[-1])

    # -- what an error means --------------------------------------------------------------
    def rejects_row(self, exc: BaseException) -> bool:
        """A value JSON cannot carry (a lone surrogate: the batch parameter is JSON), data
        exceptions (class 22: a NUL or a lone surrogate in a text, a bad encoding),
        integrity violations (23) and program limits (54000: a key over the btree's
        maximum row size)."""
        cause = exc.__cause__ if isinstance(exc, StoreError) else exc
        if isinstance(cause, orjson.JSONEncodeError):
            return True
        if not isinstance(cause, asyncpg.PostgresError):
            return False
        state = cause.sqlstate or ""
        return state.startswith(("22", "23")) or state == "54000"

    def deadlocked(self, exc: BaseException) -> bool:
        return isinstance(exc.__cause__, asyncpg.DeadlockDetectedError)

    # -- waking workers -------------------------------------------------------------------
    async def wait_for_jobs(self, timeout: float) -> None:
        if self._listener is None or self._listener.is_closed():
            async with self._listen_lock:
                if self._listener is None or self._listener.is_closed():
                    await self._listen()
        with suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), timeout)
        self._wakeup.clear()

    async def _listen(self) -> None:
        """A dedicated LISTEN connection; when it cannot be had, workers simply poll."""
        self._listener = None
        conn: asyncpg.Connection | None = None
        try:
            conn = await asyncpg.connect(self.url, timeout=_CONNECT_TIMEOUT)
            await conn.add_listener(NOTIFY_CHANNEL, self._on_notify)
        except BaseException as exc:
            # Connected but not listening (the server went away, or the worker is
            # stopping): the connection is nobody's, so it is ended here, not leaked.
            if conn is not None:
                conn.terminate()
            if isinstance(exc, (*_UNAVAILABLE, asyncpg.PostgresError)):
                return
            raise
        self._listener = conn

    def _on_notify(self, *_: object) -> None:
        self._wakeup.set()
