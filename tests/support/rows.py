"""What a test's database holds, as bytes to search for a value that must not be there."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import asyncpg


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return str(value).encode("utf-8", "surrogatepass")


def sqlite_file_bytes(db_url: str) -> bytes:
    """A SQLite store's file and its WAL, byte for byte."""
    path = Path(db_url.removeprefix("sqlite:///"))
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


async def every_row(db_url: str) -> dict[str, bytes]:
    """Each table's rows, every column's value (a blob as stored, the rest as text), by
    table: of the SQLite file, or of the PostgreSQL schema the URL selects."""
    found: dict[str, bytes] = {}
    if db_url.startswith("sqlite:"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        try:
            tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            for (name,) in tables.fetchall():
                rows = conn.execute(f'SELECT * FROM "{name}"').fetchall()
                found[name] = b"\n".join(b"\t".join(map(_as_bytes, row)) for row in rows)
        finally:
            conn.close()
        return found
    base, _, schema = db_url.partition("?search_path=")
    pg = await asyncpg.connect(base, timeout=10)
    try:
        tables = await pg.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema
        )
        for table in tables:
            name = table["table_name"]
            rows = await pg.fetch(f'SELECT * FROM "{schema}"."{name}"')
            found[name] = b"\n".join(b"\t".join(map(_as_bytes, row.values())) for row in rows)
    finally:
        await pg.close()
    return found


async def tables_holding(db_url: str, needle: str) -> list[str]:
    """The tables with a row holding ``needle`` (UTF-8) in any column."""
    wanted = needle.encode()
    return sorted(name for name, data in (await every_row(db_url)).items() if wanted in data)
