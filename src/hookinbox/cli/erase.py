"""``hookinbox erase``: one data subject's payloads, answer snippets and kept refusals.

The value is hashed with the ``[privacy]`` key and never printed, logged or audited;
``--subject -`` reads it from standard input, out of the shell's history and the process
list.
"""

from __future__ import annotations

import sys

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


@click.command()
@config_option
@click.option(
    "--subject",
    required=True,
    help="The subject's value as the source's subject pointer finds it (cus_123); "
    "'-' reads it from standard input.",
)
@click.option("--source", default=None, help="Only this source's deliveries.")
@click.option("--batch", type=int, default=None, help="Rows per transaction [1000].")
@click.option("--dry-run", is_flag=True, help="Count what would be erased; change nothing.")
@json_option
@reports_errors
def erase(
    config_path: str | None,
    subject: str,
    source: str | None,
    batch: int | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Erase a data subject's payloads, answer snippets and kept refusals' bodies (the
    journal's ids and hashes stay, so retries are still duplicates); audited once."""
    config = quiet_config(config_path)
    if subject == "-":
        subject = sys.stdin.readline().rstrip("\r\n")

    async def go() -> ops.ErasureResult:
        async with opened_store(config) as store:
            return await ops.erase_subject(
                store,
                config,
                subject=subject,
                source=source,
                dry_run=dry_run,
                batch=batch,
                actor=ops.default_actor(),
            )

    report = run(go())
    if as_json:
        print_json(report.as_json())
        return
    found = report.found
    click.echo(
        f"subject {report.subject_hash[:16]}…: {found.deliveries} deliveries, "
        f"{found.payloads} payloads, {found.snippets} answer snippets, "
        f"{found.rejected_bodies} rejected bodies"
    )
    if dry_run:
        click.echo("dry run: nothing erased")
    else:
        click.echo(
            f"erased {report.payloads} payloads, {report.snippets} answer snippets, "
            f"{report.rejected_bodies} rejected bodies in {report.batches} batch(es)"
        )
