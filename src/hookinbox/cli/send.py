"""``hookinbox send``: sign test deliveries like the provider would and send them."""

from __future__ import annotations

import json
import re

import click

from hookinbox.cli.common import (
    EVENT_TEXT,
    NON_EMPTY,
    config_option,
    fail,
    reports_errors,
    run,
)
from hookinbox.config import load_config
from hookinbox.config.schemes import SCHEME_NAMES
from hookinbox.errors import InvalidArgument

#: What a header value sent by ``send`` may be (the event id travels as ``webhook-id``).
_HEADER_VALUE = re.compile(r"[\x21-\x7e][\x20-\x7e]{0,254}")


def _not_json(constant: str) -> object:
    raise ValueError(f"{constant} is not a JSON value")


@click.command()
@config_option
@click.option("--url", type=NON_EMPTY, help="Server base URL [from config server.host/port].")
@click.option("--source", type=NON_EMPTY, help="Source name [the only source, if one].")
@click.option("--type", "event_type", type=EVENT_TEXT, default="test.event", show_default=True)
@click.option("--id", "event_id", type=EVENT_TEXT, help="Event id [a new one].")
@click.option("--data", default="{}", help="JSON object for the event's data.")
@click.option("--repeat", default=1, type=click.IntRange(1, 10000), show_default=True)
@click.option("--concurrent", is_flag=True, help="Send the repeats at the same time.")
@click.option("--tamper", is_flag=True, help="Change the body after signing it.")
@click.option("--scheme", type=NON_EMPTY, help="Sign with this scheme [the source's].")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per answer.")
@reports_errors
def send(
    config_path: str | None,
    url: str | None,
    source: str | None,
    event_type: str,
    event_id: str | None,
    data: str,
    repeat: int,
    concurrent: bool,
    tamper: bool,
    scheme: str | None,
    as_json: bool,
) -> None:
    """Sign and send test deliveries to a running server; print each answer. Exit 1
    when one gets no answer or one other than 2xx (with --tamper: other than 400, the
    signature's refusal)."""
    from hookinbox.cli.sending import SendOptions, send_deliveries

    try:
        parsed = json.loads(data, parse_constant=_not_json)
    except ValueError as exc:
        raise InvalidArgument(f"--data is not valid JSON: {exc}") from None
    except RecursionError:
        raise InvalidArgument("--data is not valid JSON: nested too deep") from None
    if not isinstance(parsed, dict):
        raise InvalidArgument("--data must be a JSON object")
    if event_id is not None and not _HEADER_VALUE.fullmatch(event_id):
        raise InvalidArgument(
            "--id: an event id is sent as a header: printable ASCII, 1 to 255 characters"
        )
    if scheme is not None and scheme not in SCHEME_NAMES:
        # The command line's slip, not the source's: its configured scheme is fine.
        raise InvalidArgument(
            f"--scheme: unknown scheme {scheme!r} (known: {', '.join(SCHEME_NAMES)})"
        )
    if url is not None:
        import httpx

        try:
            httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise InvalidArgument(f"--url: not a URL: {exc}") from None
    config = load_config(config_path)
    options = SendOptions(
        url=url,
        source=source,
        event_type=event_type,
        event_id=event_id,
        data=parsed,
        repeat=repeat,
        concurrent=concurrent,
        tamper=tamper,
        scheme=scheme,
    )
    answers = run(send_deliveries(config, options))
    for answer in answers:
        if as_json:
            click.echo(json.dumps(answer))
        else:
            challenge = "challenge" if "challenge" in answer else ""
            detail = answer.get("status") or answer.get("error") or challenge
            extra = " conflict" if answer.get("conflict") else ""
            click.echo(
                f"#{answer['n']:<3} {answer['http_status']} {detail}{extra} "
                f"{answer.get('delivery_id') or ''}".rstrip()
            )
    unreached = [a for a in answers if a["http_status"] == 0]
    if unreached:
        first = unreached[0]
        fail(
            "connection_failed",
            f"{len(unreached)} of {len(answers)} deliveries could not reach "
            f"{first['url']} ({first['error'].removeprefix('connection failed: ')}); "
            "is `hookinbox serve` running there (--url, or server.host/port in the config)?",
            1,
        )
    # A tampered copy is sent to be refused for its signature; any other to be taken.
    unexpected = [
        a
        for a in answers
        if (a["http_status"] != 400 if tamper else not 200 <= a["http_status"] < 300)
    ]
    if unexpected:
        first = unexpected[0]
        # Whatever the server at --url wrote: one line, bounded.
        said = " ".join(str(first.get("error") or first.get("status") or "").split())[:80]
        what = (
            "tampered deliveries were answered other than 400, the signature's refusal"
            if tamper
            else "deliveries were answered other than 2xx"
        )
        fail(
            "unexpected_answer",
            f"{len(unexpected)} of {len(answers)} {what} "
            f"(the first: {first['http_status']} {said}".rstrip()
            + ")",
            1,
        )
