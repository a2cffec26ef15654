"""The two SQL dialects: the few macros statements use, and how placeholders are written.

Statements (:class:`~hookinbox.store.sql.Sql`) are written once in the SQL both databases
share. Where they differ, a statement names a macro in braces and each dialect renders
it, once per statement (the result is cached):

=====================  ==================================  ====================================
macro                  PostgreSQL                          SQLite
=====================  ==================================  ====================================
``{now}``              ``now()``                           unix seconds from SQLite's clock
``{secs:x}``           ``make_interval(secs => :x)``       ``:x`` (seconds are its time unit)
``{age:col}``          seconds since ``col``               the same, on REAL unix seconds
``{minute:col}``       minutes since the epoch of ``col``  the same
``{in:x}``             ``= ANY(:x)`` (a list parameter)    ``IN (SELECT value FROM json_each)``
``{for_update}``       ``FOR UPDATE``                      nothing (the write lock serializes)
``{skip_locked:a}``    ``FOR UPDATE [OF a] SKIP LOCKED``   nothing
``{xact_lock:x}``      a select-list value that holds a    ``NULL`` (the write lock serializes)
                       transaction lock on text ``:x``
``{job_states}``       states of delivery ``d``'s jobs,    the same
                       comma-joined, ordered by action
``{table_exists:x}``   whether table ``:x`` exists         the same
``{payload_is:p}``     payload ``p``'s JSON value at       the same, with SQLite's JSON
                       ``:payload_path`` is                functions; a body that is not
                       ``:payload_value``, for a body      JSON never matches
                       holding ``:needle``
``{soft_commit}``      a select-list value that makes      ``NULL`` (nothing: SQLite's commit
                       this transaction's commit not       is what it is)
                       wait for the WAL flush
``{collate:x}``        ``COLLATE "x"``                     nothing (every text is byte order)
``{in_found}`` ...     ``= ANY(ARRAY(`` subquery ``))``:   ``IN (`` subquery ``)``
``{end_in_found}``     the subquery run once, whole, and
                       its rows looked up one by one
``{jobs_of:x}``        the jobs ``j`` of delivery ``x``:   ``j.delivery_id = x``
                       a range of ``jobs_pkey``
``{per_row}``          ``OFFSET 0``, ending a subquery:    nothing
                       run for each outer row, never
                       flattened into a join
``{join_jobs_of:x}``   a ``CROSS JOIN LATERAL`` of the     ``JOIN jobs j ON j.delivery_id = x``
                       jobs ``j`` of each row's delivery
                       ``x``, probed per row
=====================  ==================================  ====================================

``{collate:x}`` is for joins between ``deliveries.id`` (``{ordered_text}``: ``COLLATE "C"`` on
PostgreSQL) and the plain ``text`` columns that point at it (``payloads.delivery_id``,
``jobs.delivery_id``): without a collation on one side, PostgreSQL cannot use the other
side's index for the join and hashes whole tables instead.

The schema (``store/schema/NNN_name.sql``) is written once too, with a few type macros
(:meth:`Dialect.render_schema`): ``{time}`` (``timestamptz`` / ``REAL`` unix seconds),
``{default_now}`` (`` DEFAULT now()`` / nothing: SQLite's statements always pass the time),
``{ordered_text}`` (``text COLLATE "C"`` / ``text``, whose default collation is already
byte order), ``{bytes}``, ``{serial}`` (an auto-numbered primary key) and ``{flag:col}``
(``boolean`` / a 0-or-1 ``INTEGER``).

Placeholders are ``:name``. SQLite binds them as they are; PostgreSQL's are turned into
``$1..$n`` (a name used twice is one number). PostgreSQL types a parameter where it
first appears, so write ``(col = :x OR :x IS NULL)``, never ``:x IS NULL OR ...``.
Quoted strings, quoted names and ``::`` casts are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from hookinbox.store.sql import Sql

#: SQLite's clock in unix seconds (millisecond precision): every process on the host
#: agrees on leases and due times, and no worker's clock is ever used.
SQLITE_NOW = "((julianday('now') - 2440587.5) * 86400.0)"

_TOKENS = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"|--[^\n]*|::|:([A-Za-z_]\w*)")


@dataclass(frozen=True, slots=True)
class Rendered:
    """A statement as one database runs it, with its parameter names in ``$n`` order
    (empty for SQLite, which binds by name)."""

    text: str
    names: tuple[str, ...]


class _Macro:
    """One macro, applied when ``str.format_map`` meets ``{name}`` or ``{name:arg}``."""

    def __init__(self, render: Callable[[str], str]) -> None:
        self._render = render

    def __format__(self, arg: str) -> str:
        return self._render(arg)


def _postgres_jobs_of(delivery_id: str) -> str:
    """The jobs ``j`` of a journal row, found by their range of ids in ``jobs_pkey`` (a
    job's id is its delivery's, ':', its action): PostgreSQL has no index on
    ``jobs.delivery_id`` (migration 030: one index fewer written per received delivery
    and per update of a drained job), and over the days of jobs (migration 028) the
    range leaves one day in the plan where the delivery id alone leaves every day."""
    return (
        f'j.delivery_id = {delivery_id} COLLATE "default"'
        f' AND j.id >= {delivery_id} COLLATE "default"'
        f' AND j.id < hookinbox_id_after({delivery_id}) COLLATE "default"'
    )


class Dialect:
    def __init__(
        self,
        name: str,
        macros: Mapping[str, Callable[[str], str]],
        *,
        schema: Mapping[str, Callable[[str], str]],
        numbered: bool,
    ):
        self.name = name
        self._macros = {key: _Macro(fn) for key, fn in macros.items()}
        self._schema = {key: _Macro(fn) for key, fn in schema.items()}
        self._numbered = numbered
        self._cache: dict[Sql, Rendered] = {}

    def render(self, sql: Sql) -> Rendered:
        done = self._cache.get(sql)
        if done is None:
            done = self._cache[sql] = self._render(sql.text)
        return done

    def forget(self, sql: Sql) -> None:
        """Drop a statement's rendering: for a statement made at run time
        (:func:`hookinbox.store.sql.pinned`) that is not run again."""
        self._cache.pop(sql, None)

    def render_schema(self, template: str) -> str:
        """A migration template as this database runs it."""
        return template.format_map(self._schema)

    def _render(self, template: str) -> Rendered:
        text = template.format_map(self._macros)
        if not self._numbered:
            return Rendered(text, ())
        names: list[str] = []

        def number(match: re.Match[str]) -> str:
            name = match.group(1)
            if name is None:
                return match.group(0)
            if name not in names:
                names.append(name)
            return f"${names.index(name) + 1}"

        return Rendered(_TOKENS.sub(number, text), tuple(names))


POSTGRES = Dialect(
    "postgres",
    {
        "now": lambda _: "now()",
        "secs": lambda x: f"make_interval(secs => :{x})",
        "age": lambda col: f"extract(epoch FROM now() - {col})",
        "minute": lambda col: f"(extract(epoch FROM date_trunc('minute', {col})) / 60)::bigint",
        "in": lambda x: f"= ANY(:{x})",
        "for_update": lambda _: "FOR UPDATE",
        "skip_locked": lambda alias: f"FOR UPDATE{f' OF {alias}' if alias else ''} SKIP LOCKED",
        "xact_lock": lambda x: f"pg_advisory_xact_lock(hashtext(:{x}))",
        "job_states": lambda _: (
            "(SELECT string_agg(j.state, ',' ORDER BY j.action) FROM jobs j"
            f" WHERE {_postgres_jobs_of('d.id')})"
        ),
        "jobs_of": lambda x: _postgres_jobs_of(x),
        # Ends a subquery PostgreSQL must run for each outer row, not flatten into a join
        # (an OFFSET keeps it a SubPlan): see docs/store.md, "{per_row}".
        "per_row": lambda _: "OFFSET 0",
        # A join to each row's jobs, kept a probe per row for the same reason.
        "join_jobs_of": lambda x: (
            f"CROSS JOIN LATERAL (SELECT j.* FROM jobs j WHERE {_postgres_jobs_of(x)} OFFSET 0) j"
        ),
        "jobs_kept_from": lambda _: 'hookinbox_jobs_kept_from() COLLATE "C"',
        "table_exists": lambda x: f"to_regclass(:{x}) IS NOT NULL",
        # hookinbox_payload_json (migration 006) is NULL for a body that is not JSON; its
        # high declared cost has the planner check the byte search first.
        "payload_is": lambda p: (
            f"position(:needle IN {p}.body) > 0 AND hookinbox_payload_json({p}.body)"
            " #> string_to_array(:payload_path, '.') = CAST(:payload_value AS jsonb)"
        ),
        # Soft state only (a destination's bucket, slots and circuit): losing the last
        # few such commits in a crash is harmless, and it spares a flush per forward.
        "soft_commit": lambda _: "set_config('synchronous_commit', 'off', true)",
        "collate": lambda x: f'COLLATE "{x}"',
        "in_found": lambda _: "= ANY(ARRAY(",
        "end_in_found": lambda _: "))",
    },
    schema={
        "time": lambda _: "timestamptz",
        "default_now": lambda _: " DEFAULT now()",
        "ordered_text": lambda _: 'text COLLATE "C"',
        "bytes": lambda _: "bytea",
        "serial": lambda _: "bigserial PRIMARY KEY",
        "flag": lambda _: "boolean NOT NULL DEFAULT false",
    },
    numbered=True,
)

SQLITE = Dialect(
    "sqlite",
    {
        "now": lambda _: SQLITE_NOW,
        "secs": lambda x: f":{x}",
        "age": lambda col: f"({SQLITE_NOW} - {col})",
        "minute": lambda col: f"CAST({col} / 60 AS INTEGER)",
        "in": lambda x: f"IN (SELECT value FROM json_each(:{x}))",
        "for_update": lambda _: "",
        "skip_locked": lambda _: "",
        "xact_lock": lambda _: "NULL",
        "job_states": lambda _: (
            "(SELECT group_concat(state) FROM (SELECT state FROM jobs j"
            " WHERE j.delivery_id = d.id ORDER BY action))"
        ),
        "jobs_of": lambda x: f"j.delivery_id = {x}",
        "per_row": lambda _: "",
        "join_jobs_of": lambda x: f"JOIN jobs j ON j.delivery_id = {x}",
        "jobs_kept_from": lambda _: "''",
        "table_exists": lambda x: (
            f"EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :{x})"
        ),
        "payload_is": lambda p: (
            f"CASE WHEN instr({p}.body, :needle) > 0 AND json_valid(CAST({p}.body AS TEXT))"
            f" THEN CAST({p}.body AS TEXT) -> ('$.\"' || replace(:payload_path, '.', '\".\"')"
            " || '\"') END = :payload_value"
        ),
        "soft_commit": lambda _: "NULL",
        "collate": lambda _: "",
        "in_found": lambda _: "IN (",
        "end_in_found": lambda _: ")",
    },
    schema={
        "time": lambda _: "REAL",
        "default_now": lambda _: "",
        "ordered_text": lambda _: "TEXT",
        "bytes": lambda _: "BLOB",
        "serial": lambda _: "INTEGER PRIMARY KEY AUTOINCREMENT",
        "flag": lambda col: f"INTEGER NOT NULL DEFAULT 0 CHECK ({col} IN (0, 1))",
    },
    numbered=False,
)
