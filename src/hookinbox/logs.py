"""Structured logs: JSON lines by default, one per receipt and per job attempt.

What may appear in a log line: ids, hashes, types, times, counts, status and error codes.
Never a payload, a secret, or a header value. Call sites pass only such fields; nothing
here formats a body or an exception message, since either can carry payload data.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import sys
import threading
import time
from collections.abc import MutableMapping
from contextvars import ContextVar
from pathlib import PurePath
from typing import Any, Literal, TextIO

import orjson
import structlog
from structlog.contextvars import STRUCTLOG_KEY_PREFIX, merge_contextvars

LogFormat = Literal["json", "console"]

#: The id of the request being answered, in every line logged while it is (``request_id``).
#: A ContextVar of our own, set and reset once per request: structlog's
#: ``bind_contextvars``/``unbind_contextvars`` cost more per delivery. It is named with
#: structlog's prefix, so ``merge_contextvars`` adds it to each line as it did the bound
#: value -- in our configuration and in a library user's own. Unset is ``...``, as there.
REQUEST_ID: ContextVar[Any] = ContextVar(f"{STRUCTLOG_KEY_PREFIX}request_id", default=...)


def configure_logging(
    fmt: LogFormat = "json", level: str = "info", *, capture_libraries: bool = False
) -> None:
    """hookinbox's lines at ``level`` and up. ``capture_libraries`` (hookinbox's own
    processes, never an application that mounts the inbox: its logging is its own) also
    turns the standard-library records of the libraries underneath (asyncpg's pool,
    uvicorn, asyncio) into such lines, so stderr holds nothing but them."""
    global _json_lines
    processors: list[Any] = [merge_contextvars, _level_and_time]
    renderer: Any = (
        _render_json if fmt == "json" else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    pipeline = [*processors, renderer]
    min_level = logging.getLevelNamesMapping()[level.upper()]
    wrapper = structlog.make_filtering_bound_logger(min_level)
    structlog.configure(
        processors=pipeline,
        wrapper_class=wrapper,
        logger_factory=lambda *args: _writer,
        cache_logger_on_first_use=True,
    )
    _json_lines = _JsonLines(pipeline, wrapper, min_level) if fmt == "json" else None
    if capture_libraries:
        _capture_library_logs(level)


def _level_and_time(
    logger: Any, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog's add_log_level and an ISO UTC TimeStamper, in one call (hot path)."""
    event_dict["level"] = "warning" if method == "warn" else method
    event_dict["timestamp"] = _utc_now_iso()
    return event_dict


_second: tuple[int, str] = (-1, "")


def _utc_now_iso() -> str:
    """``2026-12-01T09:03:14.604363Z``: the date and time are formatted once a second and
    only the microseconds per line (half the cost of ``datetime.isoformat`` per line)."""
    global _second
    now = time.time()
    whole = int(now)
    if whole != _second[0]:
        _second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
    return f"{_second[1]}.{int((now - whole) * 1_000_000):06d}Z"


def _render_json(logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> str:
    return orjson.dumps(event_dict, default=str).decode()


class LineWriter:
    """Writes rendered lines to stderr, one ``write`` per turn of the event loop.

    A busy receiver logs a line per delivery; a system call per line costs more than the
    rest of the line. On the event loop's thread lines are gathered and written together
    as soon as the loop has run what was ready (microseconds later, in order); from any
    other thread, or with no loop running, a line is written at once, or joins the lines
    gathered when the loop's write of them is already due. Lines still
    gathered are written at exit; a SIGKILL can lose only the current loop turn's lines.
    """

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._scheduled = False
        self._lock = threading.Lock()

    @property
    def _file(self) -> TextIO:
        return sys.stderr  # looked up each time: tests and tools swap sys.stderr

    def write_line(self, message: str) -> None:
        with self._lock:
            if self._scheduled:
                # This turn's flush is on its way: asking for the running loop again is a
                # getpid() system call on CPython 3.11, once per line.
                self._lines.append(message)
                return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            with self._lock:
                self._flush_locked()
                self._file.write(message + "\n")
                self._file.flush()
            return
        with self._lock:
            self._lines.append(message)
            if not self._scheduled:
                self._scheduled = True
                loop.call_soon(self.flush)

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        self._scheduled = False
        if self._lines:
            lines, self._lines = self._lines, []
            self._file.write("\n".join(lines) + "\n")
            self._file.flush()

    msg = debug = info = warning = warn = error = critical = exception = fatal = write_line


_writer = LineWriter()
atexit.register(_writer.flush)


class _JsonLines:
    """The configuration :func:`configure_logging` made for JSON lines, so that a
    :class:`Logger` can tell when its assembled logger would do exactly what a
    :class:`_DirectLine` does."""

    __slots__ = ("min_level", "pipeline", "wrapper")

    def __init__(self, pipeline: list[Any], wrapper: type, min_level: int) -> None:
        self.pipeline = pipeline
        self.wrapper = wrapper
        self.min_level = min_level

    def serves(self, assembled: Any) -> bool:
        """Whether ``assembled`` was made by this configuration and its processors are
        still ours: structlog keeps the list a logger was assembled with and changes it in
        place (``structlog.testing.capture_logs`` does), so it is looked at per line."""
        pipeline = assembled._processors
        return (
            type(assembled) is self.wrapper
            and pipeline is self.pipeline
            and len(pipeline) == 3
            and pipeline[0] is merge_contextvars
            and pipeline[1] is _level_and_time
            and pipeline[2] is _render_json
        )


#: Set by :func:`configure_logging` for JSON lines; None for console lines and for an
#: application's own structlog configuration.
_json_lines: _JsonLines | None = None

#: The standard-library level of each method a :class:`Logger` offers.
_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class _DirectLine:
    """One level's method of a :class:`Logger`: the processors of our JSON configuration
    called in turn and the line handed to the writer, which is what structlog does with
    them, without its bound logger's dispatch (about a fifth of a receipt line's cost)."""

    __slots__ = ("_context", "_method")

    def __init__(self, context: dict[str, Any], method: str) -> None:
        self._context = context
        self._method = method

    def __call__(self, event: str, *args: Any, **fields: Any) -> None:
        method = self._method
        event_dict = self._context.copy()
        event_dict.update(fields)
        event_dict["event"] = event % args if args else event
        merged = _level_and_time(None, method, merge_contextvars(None, method, event_dict))
        _writer.write_line(_render_json(None, method, merged))


class Logger:
    """A module's logger (:func:`get_logger`): structlog's lazy proxy, minus its cost per
    line once structlog caches loggers.

    The proxy assembles a logger on every call, or on the first one only when the
    configuration says ``cache_logger_on_first_use`` (ours does); either way it finds
    ``info`` through ``__getattr__``, after a failed attribute lookup, which cost ~4 us
    of a receipt line's ~16 (timeit, inside the loop). Here each method is a property
    that asks the proxy for its logger by the same rule -- kept once assembled under a
    caching configuration, assembled anew otherwise (structlog's defaults,
    ``structlog.testing.capture_logs``) -- and hands back that logger's own method; or,
    while that logger is one our JSON configuration made and its processors are still
    ours, a :class:`_DirectLine` that writes the same line for less."""

    __slots__ = ("_assembled", "_direct", "_proxy")

    def __init__(self, proxy: Any) -> None:
        self._proxy = proxy
        self._assembled: Any = None
        self._direct: dict[str, _DirectLine] = {}

    def _method(self, name: str) -> Any:
        assembled = self._assembled
        if assembled is None:
            assembled = self._proxy.bind()
            if not structlog.get_config()["cache_logger_on_first_use"]:
                return getattr(assembled, name)
            self._assembled = assembled
            lines = _json_lines
            if lines is not None and lines.serves(assembled):
                self._direct = {
                    method: _DirectLine(assembled._context, method)
                    for method, level in _LEVELS.items()
                    if level >= lines.min_level
                }
        direct = self._direct.get(name)
        if direct is not None and _json_lines is not None and _json_lines.serves(assembled):
            return direct
        return getattr(assembled, name)

    @property
    def debug(self) -> Any:
        return self._method("debug")

    @property
    def info(self) -> Any:
        return self._method("info")

    @property
    def warning(self) -> Any:
        return self._method("warning")

    @property
    def error(self) -> Any:
        return self._method("error")


def get_logger(name: str) -> Logger:
    return Logger(structlog.get_logger(component=name.removeprefix("hookinbox.")))


def exception_fields(exc: BaseException) -> dict[str, str]:
    """What a log line may say about an exception nobody expected: its class and the file
    and line that raised it. Never its message nor a traceback: a message may quote the
    payload, and a traceback's frames hold the body and the headers."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f"{PurePath(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb else ""
    return {"exception": type(exc).__name__, "at": where}


#: How long a library's message may be in a line (its first line only).
_LIBRARY_MESSAGE_CHARS = 200
#: At most one line per library logger and message in this many seconds; the next line
#: after a pause says how many were left out. A sender can make uvicorn log a warning
#: per malformed request, as fast as it can send them.
LIBRARY_LINE_INTERVAL_SECONDS = 1.0
#: Distinct (logger, message) pairs remembered before the memory starts over.
_LIBRARY_KEYS = 1024


class _LibraryRecords(logging.Handler):
    """A library's log record as one hookinbox line (event ``library_log``): its logger,
    level and message TEMPLATE (``record.msg``, never formatted with its arguments), and
    for an exception its class and where it was raised. Not the arguments, the exception's
    text or a traceback: any of them can quote a payload, a header or a connection string.
    asyncpg, for one, logs a traceback each time its pool fails to reconnect while the
    database is down; without this, that is what an operator's log pipeline would get.
    The same record is written at most once per :data:`LIBRARY_LINE_INTERVAL_SECONDS`
    (``logging`` calls ``emit`` under the handler's lock, from any thread)."""

    def __init__(self) -> None:
        super().__init__()
        #: (logger, message) -> when its last line was written, records left out since.
        self._last: dict[tuple[str, str], tuple[float, int]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        try:
            template = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
            message = template.strip().split("\n", 1)[0][:_LIBRARY_MESSAGE_CHARS]
            fields: dict[str, Any] = {"logger": record.name, "message": message}
            key, now = (record.name, message), time.monotonic()
            last = self._last.get(key)
            if last is not None and now - last[0] < LIBRARY_LINE_INTERVAL_SECONDS:
                self._last[key] = (last[0], last[1] + 1)
                return
            if last is not None and last[1]:
                fields["suppressed"] = last[1]
            if len(self._last) >= _LIBRARY_KEYS:
                self._last.clear()
            self._last[key] = (now, 0)
            if record.exc_info is not None and record.exc_info[1] is not None:
                fields.update(exception_fields(record.exc_info[1]))
            line = _library_log.error if record.levelno >= logging.ERROR else _library_log.warning
            line("library_log", **fields)
        except Exception:  # a log line must never raise into the library that logged
            pass


_library_log = get_logger("library")


def _capture_library_logs(level: str) -> None:
    """Route the standard-library records of warning and up to :class:`_LibraryRecords`
    (once: configuring again only moves the level). Never below warning, whatever
    hookinbox's own level: a library's debug lines (httpcore's trace of each exchange)
    carry values, not templates, and are for its own authors."""
    root = logging.getLogger()
    root.setLevel(max(logging.WARNING, logging.getLevelNamesMapping()[level.upper()]))
    if not any(isinstance(handler, _LibraryRecords) for handler in root.handlers):
        for handler in list(root.handlers):
            root.removeHandler(handler)
        root.addHandler(_LibraryRecords())
