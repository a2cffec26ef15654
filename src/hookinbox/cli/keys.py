"""``hookinbox keys status|rotate``: the encryption key ring's sealed values per key, and
the rotation that re-wraps them to the ring's first key (docs/operations/encryption.md).

Rotation: put the new key first in the ring (``k2:...,k1:...``), restart (new values are
sealed with it), run ``hookinbox keys rotate``, check ``hookinbox keys status`` shows
nothing under the old key, then drop it from the ring.
"""

from __future__ import annotations

import click

from hookinbox import ops
from hookinbox.cli.common import (
    config_option,
    json_option,
    opened_store,
    quiet_config,
    reports_errors,
    run,
)
from hookinbox.cli.output import print_json
from hookinbox.ops.keys import KeyRotation, key_counts, rotate_keys
from hookinbox.store import KeyCount, RewrapBatch


@click.group()
def keys() -> None:
    """The encryption key ring: sealed values per key; re-wrap them to the first key."""


@keys.command("status")
@config_option
@json_option
@reports_errors
def keys_status(config_path: str | None, as_json: bool) -> None:
    """Sealed values per table and key id, and the key the ring seals with now."""
    config = quiet_config(config_path)

    async def go() -> tuple[str | None, list[KeyCount]]:
        async with opened_store(config) as store:
            return store.sealer.current_key_id, await key_counts(store)

    current, counts = run(go())
    if as_json:
        print_json({"current_key_id": current, "sealed": [c.as_json() for c in counts]})
        return
    click.echo(f"sealing with: {current or '(no key ring)'}")
    if not counts:
        click.echo("no sealed values")
    for count in counts:
        mark = "" if count.key_id == current else "  (not the current key: run keys rotate)"
        click.echo(f"{count.table}\t{count.key_id}\t{count.rows}{mark}")


@keys.command("rotate")
@config_option
@click.option("--batch", default=500, show_default=True, help="Rows re-wrapped per transaction.")
@click.option("--dry-run", is_flag=True, help="Count what would be re-wrapped; change nothing.")
@json_option
@reports_errors
def keys_rotate(config_path: str | None, batch: int, dry_run: bool, as_json: bool) -> None:
    """Re-wrap every sealed value's data key with the ring's first key, in batches (one
    short transaction each: receiving never pauses). The old keys must stay in the ring
    until it is done."""
    config = quiet_config(config_path)
    actor = ops.default_actor()

    def progress(page: RewrapBatch) -> None:
        if not as_json and page.rewrapped:
            click.echo(f"  {page.table}: {page.rewrapped} re-wrapped", err=True)

    async def go() -> KeyRotation:
        async with opened_store(config) as store:
            return await rotate_keys(
                store, actor=actor, batch=batch, dry_run=dry_run, progress=progress
            )

    rotation = run(go())
    if as_json:
        print_json(rotation.as_json())
        return
    verb = "to re-wrap" if dry_run else "re-wrapped"
    click.echo(f"key {rotation.key_id}{' (dry run)' if dry_run else ''}:")
    for table in rotation.tables:
        changed = f", {table.changed} changed meanwhile (left)" if table.changed else ""
        click.echo(f"  {table.table}: {table.seen} sealed, {table.rewrapped} {verb}{changed}")
