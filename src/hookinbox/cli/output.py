"""How the CLI shows what it found: tables that fit the terminal, TSV, JSON, and the
``--format``/``--json``/``--wide`` options of every list command.

A table is read by a person at a terminal, often 80 columns, and its ids are what that
person pastes into the next command (``show``, ``retry``, ``trace``). So an id is never
cut or wrapped; times are compact and relative (``3m ago``, ``in 6d``); only free text
wraps. When even that does not fit, the columns least needed go first (``--wide`` shows
them all, with full UTC times), and when the ids alone are wider than the terminal each
row is printed as ``name  value`` lines instead. TSV and JSON are for programs: every
column, full times, nothing wrapped.
"""

from __future__ import annotations

import functools
import json
import shutil
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar, cast, get_args

import click

from hookinbox.errors import InvalidArgument
from hookinbox.store import iso
from hookinbox.times import relative_time

F = TypeVar("F", bound=Callable[..., Any])

Format = Literal["table", "tsv", "json"]
FORMATS: tuple[Format, ...] = get_args(Format)
#: ``id``: whole, never wrapped; ``text``: wraps (free text, a type, a code); ``time``: a
#: datetime, shown relative (``--wide``: UTC to the second); ``short``: a state, a count.
ColumnKind = Literal["id", "text", "time", "short"]
#: A table's cell: text, or a datetime for a ``time`` column.
Cell = str | int | datetime | None

#: The narrowest a wrapped text column gets before a column is dropped instead.
MIN_TEXT_WIDTH = 16
GAP = "  "


@dataclass(frozen=True, slots=True)
class Output:
    """What the caller asked for: ``--format`` (``--json`` is ``--format json``), ``--wide``."""

    format: Format = "table"
    wide: bool = False


def output_options(fn: F) -> F:
    """``--format table|tsv|json``, ``--json`` (its alias) and ``--wide`` for a list command;
    the command gets them as one ``out: Output``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        chosen, as_json = kwargs.pop("output_format"), kwargs.pop("as_json")
        if as_json and chosen not in (None, "json"):
            raise InvalidArgument(f"--json is --format json; it cannot go with --format {chosen}")
        fmt = cast(Format, "json" if as_json else chosen or "table")
        return fn(*args, out=Output(fmt, kwargs.pop("wide")), **kwargs)

    wrapper = click.option(
        "--wide", is_flag=True, help="Every column, full UTC times (lines may be long)."
    )(wrapper)
    wrapper = click.option("--json", "as_json", is_flag=True, help="The same as --format json.")(
        wrapper
    )
    wrapper = click.option(
        "--format",
        "output_format",
        type=click.Choice(FORMATS),
        default=None,
        help="table (fits the terminal; the default), tsv or json (every column, full times).",
    )(wrapper)
    return cast(F, wrapper)


def json_requested() -> bool:
    """Whether the running command was asked for JSON (``--json`` or ``--format json``),
    so that its error is a JSON object too."""
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if ctx.params.get("as_json") or ctx.params.get("output_format") == "json":
            return True
        ctx = ctx.parent
    return False


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=str))


def terminal_width() -> int:
    """``$COLUMNS``, else the terminal's width, else 80 (a pipe)."""
    return max(20, shutil.get_terminal_size((80, 24)).columns)


# -- times ----------------------------------------------------------------------------------
def utc_seconds(value: datetime | None) -> str:
    """``2026-12-01T21:58:16Z``: what ``--wide`` shows."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- tables ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Column:
    name: str
    kind: ColumnKind = "short"
    #: When the terminal is too narrow, the column with the highest ``drop`` goes first;
    #: 0 is never dropped (the row's id and its state).
    drop: int = 0
    #: Shown only with ``--wide`` (and in TSV).
    wide_only: bool = False


def show_rows(
    out: Output,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    *,
    as_json: Callable[[], Any],
    empty: str,
) -> None:
    """A list command's answer in the format asked for; ``empty`` is the table's line
    when there is nothing (TSV then prints its header alone, JSON its value)."""
    if out.format == "json":
        print_json(as_json())
    elif out.format == "tsv":
        for line in tsv_lines(columns, rows):
            click.echo(line)
    elif not rows:
        click.echo(empty)
    else:
        lines = table_lines(
            columns, rows, width=terminal_width(), wide=out.wide, now=datetime.now(UTC)
        )
        for line in lines:
            click.echo(line)


def terminal_table(columns: Sequence[Column], rows: Sequence[Sequence[Cell]]) -> list[str]:
    """A table inside a ``show``: fitted to the terminal, relative times."""
    return table_lines(columns, rows, width=terminal_width(), wide=False, now=datetime.now(UTC))


def tsv_lines(columns: Sequence[Column], rows: Sequence[Sequence[Cell]]) -> list[str]:
    """A header and a line per row, every column, times in full ISO, no tab or line break
    inside a value."""

    def clean(value: Cell) -> str:
        text = iso(value) if isinstance(value, datetime) else None if value is None else str(value)
        return (text or "").replace("\t", " ").replace("\r", " ").replace("\n", " ")

    return ["\t".join(c.name for c in columns)] + ["\t".join(clean(v) for v in row) for row in rows]


def table_lines(
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    *,
    width: int,
    wide: bool,
    now: datetime,
) -> list[str]:
    """The table as lines of at most ``width`` characters (unless ``wide``, or an id
    longer than the terminal)."""
    shown = [i for i, c in enumerate(columns) if wide or not c.wide_only]

    def text(i: int, value: Cell) -> str:
        if isinstance(value, datetime):
            return utc_seconds(value) if wide else relative_time(value, now, compact=True)
        return "" if value is None else " ".join(str(value).split())

    cells = [{i: text(i, row[i]) for i in shown} for row in rows]
    natural = {i: max([len(columns[i].name)] + [len(r[i]) for r in cells]) for i in shown}

    def least(i: int) -> int:
        if columns[i].kind != "text":
            return natural[i]
        return min(natural[i], max(MIN_TEXT_WIDTH, len(columns[i].name)))

    def needed(which: list[int]) -> int:
        return sum(least(i) for i in which) + len(GAP) * (len(which) - 1)

    if not wide:
        every = list(shown)
        while needed(shown) > width:
            droppable = [i for i in shown if columns[i].drop > 0]
            if not droppable:
                return _records(columns, every, cells)
            shown.remove(max(droppable, key=lambda i: (columns[i].drop, i)))
    widths = natural if wide else _fit(columns, shown, natural, least, width)
    lines = [_join([columns[i].name.ljust(widths[i]) for i in shown], bold=True)]
    for row in cells:
        wrapped = {
            i: _wrap(row[i], widths[i]) if columns[i].kind == "text" else [row[i]] for i in shown
        }
        for n in range(max(len(parts) for parts in wrapped.values())):
            lines.append(
                _join([(w[n] if n < len(w) else "").ljust(widths[i]) for i, w in wrapped.items()])
            )
    return lines


def _fit(
    columns: Sequence[Column],
    shown: list[int],
    natural: dict[int, int],
    least: Callable[[int], int],
    width: int,
) -> dict[int, int]:
    """Every column at its natural width, but the text columns share what is left of the
    terminal, the narrowest first (each gets at least its ``least``)."""
    widths = {i: natural[i] for i in shown}
    texts = sorted((i for i in shown if columns[i].kind == "text"), key=lambda i: natural[i])
    room = width - len(GAP) * (len(shown) - 1) - sum(natural[i] for i in shown if i not in texts)
    if sum(natural[i] for i in texts) <= room:
        return widths
    for n, i in enumerate(texts):
        share = room // (len(texts) - n)
        widths[i] = max(least(i), min(natural[i], share))
        room -= widths[i]
    return widths


def _wrap(value: str, width: int) -> list[str]:
    """Between words; a word wider than the column after its last ``.``, ``_``, ``/``, ``:``
    or ``-`` that fits (``checkout.session.`` / ``async_payment_failed``)."""
    lines: list[str] = []
    for line in textwrap.wrap(
        value, width=width, break_long_words=False, break_on_hyphens=False
    ) or [""]:
        while len(line) > width:
            cut = max((n + 1 for n, c in enumerate(line[:width]) if c in "._/:-"), default=width)
            lines.append(line[:cut])
            line = line[cut:]
        lines.append(line)
    return lines


def _join(parts: list[str], *, bold: bool = False) -> str:
    line = GAP.join(parts).rstrip()
    return click.style(line, bold=True) if bold else line


def _records(columns: Sequence[Column], shown: list[int], cells: list[dict[int, str]]) -> list[str]:
    """Each row as ``name  value`` lines, for a terminal narrower than the row's ids."""
    pad = max(len(columns[i].name) for i in shown)
    lines: list[str] = []
    for n, row in enumerate(cells):
        if n:
            lines.append("")
        lines += [f"{click.style(columns[i].name.ljust(pad), bold=True)}  {row[i]}" for i in shown]
    return lines


# -- one record ----------------------------------------------------------------------------
def plain(value: Any, none: str = "") -> str:
    """A value as text: yes/no, ``none`` for nothing, nested values as compact JSON (never
    a Python repr such as ``{'action': ...}``)."""
    if value is None:
        return none
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)


def field_lines(pairs: Sequence[tuple[str, object]]) -> list[str]:
    """``name  value`` lines of one record (``show``), names right-aligned."""
    pad = max((len(name) for name, _ in pairs), default=0)
    return [f"{click.style(name.rjust(pad), bold=True)}  {plain(value)}" for name, value in pairs]


def wrapped_line(text: str, indent: str = "  ", hanging: str = "      ") -> list[str]:
    """A line of parts (``name=value``, an id, a time) separated by two spaces, folded to
    the terminal between parts: a part is never split, so an id, a URL or
    ``answer='too many'`` stays whole."""
    width = terminal_width()
    if len(indent) + len(text) <= width:
        return [indent + text]
    lines: list[str] = []
    line = indent
    for part in (p.strip() for p in text.split(GAP)):
        if not part:
            continue
        if line.strip() and len(line) + len(GAP) + len(part) > width:
            lines.append(line)
            line = hanging
        line = f"{line}{GAP if line.strip() else ''}{part}"
    lines.append(line)
    return lines


def pairs_text(row: dict[str, Any]) -> str:
    """A row of a trace layer as ``name=value`` words."""
    return "  ".join(f"{k}={plain(v, '-')}" for k, v in row.items())
