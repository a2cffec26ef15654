"""The CLI in a terminal: every list command fits 80 columns with its ids whole, TSV and
JSON for programs, errors under ``--json`` as JSON objects with their code, help texts
without markup, one word per source state. The real ``hookinbox`` binary in a
subprocess; the rows are put in the store with its own methods, ids as the pipeline
makes them. What is rendered depends on no store, so this runs on SQLite alone."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest

from hookinbox.cli.main import main as cli_main
from hookinbox.ids import new_rejected_id
from hookinbox.store import NewRejected, Store, open_store_for
from tests.resources.support import ready_outbox_row, video_event_applied
from tests.support.configs import write_config
from tests.support.journal import add_delivery, settle_all
from tests.support.processes import REPO, hookinbox_env
from tests.support.signing import SECRET, SECRET_ENV

BINARY = Path(sys.executable).with_name("hookinbox")
COUNT = {"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}
#: A second source, never paused: its state is the word for "receiving".
STRIPE = '[sources.stripe]\nscheme = "stripe"\nsecret_env = "STRIPE_TEST_SECRET"\n'
#: Event ids and types of the lengths providers send (Stripe, GitHub's delivery GUID).
EVENTS = [
    ("evt_1NG8Du2eZvKYlo2CUI79vXWy", "checkout.session.async_payment_failed"),
    ("3f9b5b0e-8d6c-11ee-9a3e-4c1c2b1a0f00", "pull_request_review_comment"),
    ("evt_short", "crm.lead.created"),
]
#: A provider's task id, as a video API sends one.
TASK = "task_8f14e45fceea167a5a36dedd4bea2543"


Call = tuple[Path, tuple[str, ...]]


def hookinbox_all(calls: list[Call], columns: int = 80) -> list[subprocess.CompletedProcess[str]]:
    """Each ``(config, args)`` as its own ``hookinbox`` process in a terminal of
    ``columns``, all started at once (each is mostly its start-up), each bounded."""
    env = hookinbox_env({"COLUMNS": str(columns), SECRET_ENV: SECRET})
    started = [
        (
            [str(BINARY), *args, "--config", str(config)],
            subprocess.Popen(
                [str(BINARY), *args, "--config", str(config)],
                env=env,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
            ),
        )
        for config, args in calls
    ]
    done = []
    for argv, proc in started:
        try:
            out, err = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        done.append(subprocess.CompletedProcess(argv, proc.returncode, out, err))
    return done


def hookinbox(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (done,) = hookinbox_all([(config, args)])
    return done


@dataclass
class Rows:
    """The ids each list command must show whole."""

    config: Path
    ids: dict[str, list[str]] = field(default_factory=dict)


@pytest.fixture
async def rows(sqlite_url: str, tmp_path: Path) -> Rows:
    """One of everything a list command lists."""
    config = write_config(tmp_path / "hookinbox.toml", sqlite_url, routes=[COUNT], extra=STRIPE)
    store = open_store_for(sqlite_url)
    await store.open(create=True)
    try:
        return await _fill(store, config)
    finally:
        await store.close()


async def _fill(store: Store, config: Path) -> Rows:
    found = Rows(config)
    key = await ready_outbox_row(store, TASK)
    # A late video.processing after ready: rejected, waiting for a review.
    late = await video_event_applied(store, TASK, "processing", event_id=f"evt_late_{TASK}")
    assert late.outcome == "rejected_transition", late
    found.ids["outbox"] = [key]
    found.ids["resources"] = [key.split(":", 1)[1]]
    found.ids["reviews"] = [str(r.id) for r in await store.reviews.list_reviews()]
    assert found.ids["reviews"]
    deliveries = [
        await add_delivery(store, event_id, event_type=event_type)
        for event_id, event_type in EVENTS
    ]
    found.ids["deliveries"] = deliveries
    found.ids["dlq"] = await settle_all(store, "failed", error="connect_error")
    body = b'{"id": "evt_refused"}'
    rejected_id = await store.rejected.keep_rejected(
        NewRejected(
            id=new_rejected_id(),
            source="test",
            reason="timestamp_out_of_tolerance",
            body_sha256=hashlib.sha256(body).hexdigest(),
            body=body,
            body_bytes=len(body),
            headers={"content-type": "application/json"},
        ),
        max_rows=100,
        max_bytes=1 << 20,
    )
    assert rejected_id is not None
    found.ids["rejected"] = [rejected_id]
    await store.sources.set_source_paused(
        "test", paused=True, reason="the provider changed its signature header", actor="cli:t"
    )
    found.ids["sources"] = ["test", "stripe"]
    return found


LISTS = {
    "deliveries": ("deliveries", "list"),
    "dlq": ("dlq", "list"),
    "outbox": ("outbox", "list"),
    "rejected": ("rejected", "list"),
    "resources": ("resources", "list"),
    "reviews": ("reviews", "list"),
    "sources": ("sources", "list"),
}


def test_every_list_command_fits_80_columns_with_every_id_whole(rows: Rows) -> None:
    results = hookinbox_all([(rows.config, command) for command in LISTS.values()])
    for name, shown in zip(LISTS, results, strict=True):
        assert shown.returncode == 0, (name, shown.stderr)
        too_long = [line for line in shown.stdout.splitlines() if len(line) > 80]
        assert not too_long, (name, too_long)
        words = shown.stdout.split()
        for wanted in rows.ids[name]:
            assert wanted in words, (name, wanted, shown.stdout)
        assert "…" not in shown.stdout, (name, shown.stdout)
    # One word per state, the admin's and the API's: receiving or paused.
    states = results[list(LISTS).index("sources")].stdout
    assert re.search(r"^stripe +receiving\b", states, re.M), states
    assert re.search(r"^test +paused\b", states, re.M), states
    assert "active" not in states


def test_wide_tsv_and_json_show_every_column_and_full_times(rows: Rows) -> None:
    wide, tsv, as_json, as_format, traced = hookinbox_all(
        [
            (rows.config, ("deliveries", "list", "--wide")),
            (rows.config, ("dlq", "list", "--format", "tsv")),
            (rows.config, ("dlq", "list", "--json")),
            (rows.config, ("dlq", "list", "--format", "json")),
            (rows.config, ("trace", EVENTS[0][0])),
        ]
    )
    assert wide.returncode == 0, wide.stderr
    for event_id, event_type in EVENTS:
        assert event_id in wide.stdout.split() and event_type in wide.stdout.split()
    assert re.search(r"\b20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ\b", wide.stdout), wide.stdout

    assert tsv.returncode == 0, tsv.stderr
    header, *lines = [line.split("\t") for line in tsv.stdout.splitlines()]
    assert header[:2] == ["job_id", "reason"] and "event_id" in header
    assert sorted(line[0] for line in lines) == sorted(rows.ids["dlq"])
    assert all(len(line) == len(header) for line in lines)
    failed_at = lines[0][header.index("failed")]
    assert re.fullmatch(r"20\d\d-\d\d-\d\dT[\d:.]+Z", failed_at), failed_at

    assert json.loads(as_json.stdout) == json.loads(as_format.stdout)
    listed = json.loads(as_json.stdout)["dead_letters"]
    assert sorted(d["job_id"] for d in listed) == sorted(rows.ids["dlq"])

    # trace: each route as words, never a Python dict; its lines fit too.
    assert traced.returncode == 0, traced.stderr
    route = r"^  route count  events_match=yes  filter=no filter  job=yes$"
    assert re.search(route, traced.stdout, re.M), traced.stdout
    assert "{'" not in traced.stdout and "True" not in traced.stdout
    assert all(len(line) <= 80 for line in traced.stdout.splitlines()), traced.stdout


BOUNDED = "a bulk command is always bounded"


def test_a_bulk_command_needs_a_limit_to_change_anything_and_a_dry_run_none(
    rows: Rows,
) -> None:
    bulk = [("dlq", "retry", "--all"), ("rejected", "retry", "--all")]
    preview, *refusals = hookinbox_all(
        [(rows.config, ("dlq", "retry", "--all", "--dry-run"))]
        + [(rows.config, command) for command in bulk]
    )
    assert preview.returncode == 0, preview.stderr
    assert f"{len(rows.ids['dlq'])} dead letters match" in preview.stdout
    assert "add --limit 100 --expect" in preview.stdout
    for command, refused in zip(bulk, refusals, strict=True):
        assert refused.returncode == 5, (command, refused.stderr)
        (line,) = refused.stderr.splitlines()
        assert line == f"hookinbox: refused: {' '.join(command)} needs --limit N: {BOUNDED}"


def test_every_error_under_json_is_one_json_object_with_its_code(
    rows: Rows, tmp_path: Path
) -> None:
    missing = write_config(
        tmp_path / "typo.toml", f"sqlite:///{tmp_path}/typo/x.db", routes=[COUNT]
    )
    cases: list[tuple[Call, str, int]] = [
        ((rows.config, ("deliveries", "show", "evt_nope", "--json")), "not_found", 4),
        ((missing, ("dlq", "list", "--format", "json")), "store_not_found", 3),
        ((rows.config, ("dlq", "retry", "--all", "--json")), "refused", 5),
        ((rows.config, ("dlq", "list", "--limit", "many", "--json")), "invalid_argument", 2),
        ((rows.config, ("send", "--data", "{bad", "--json")), "invalid_argument", 2),
    ]
    results = hookinbox_all([call for call, _, _ in cases])
    for (call, code, exit_code), done in zip(cases, results, strict=True):
        assert (done.returncode, done.stdout) == (exit_code, ""), (call, done.stderr)
        (line,) = done.stderr.splitlines()
        error = json.loads(line)
        assert error["error"] == code and error["message"], (call, error)


def test_send_with_data_that_is_not_json_is_one_line_with_a_code_and_exit_2(
    rows: Rows,
) -> None:
    done = hookinbox(rows.config, "send", "--data", "{bad")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("hookinbox: invalid_argument: --data is not valid JSON"), line


#: A delivery id no store holds.
NO_DELIVERY = "dlv_" + "0" * 32
#: ``resources create`` of a video owned by ``o``, and a tenant that is fine.
CREATE = ("resources", "create", "video", "--owner", "o")
TENANT_T = ("--tenant", "t")
#: ``sources pause`` of a source that is receiving, with the reason to follow.
PAUSE = ("sources", "pause", "stripe", "--reason")


def test_every_bad_argument_is_one_line_with_its_code_never_a_traceback(
    rows: Rows, tmp_path: Path
) -> None:
    directory = tmp_path / "a_directory.toml"
    directory.mkdir()
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes(b'database = "sqlite:///caf\xe9.db"\n')
    bad_url = tmp_path / "bad_url.toml"
    bad_url.write_text('database = "postgresql://ops:s3cret@[::1/inbox"\n')
    bad_host = tmp_path / "bad_host.toml"
    bad_host.write_text(f'database = "sqlite:///{tmp_path}/x.db"\n[server]\nhost = "256.1.1.1"\n')
    no_file = tmp_path / "no_file.toml"
    no_file.write_text('database = "sqlite:///"\n')
    read_only = tmp_path / "read_only.toml"
    read_only.write_text(f'database = "sqlite:///{tmp_path}/x.db?mode=ro"\n')
    in_memory = tmp_path / "in_memory.toml"
    in_memory.write_text('database = "sqlite:///:memory:"\n')
    not_utf8 = "data.x = \udcff"  # the bytes 0xff, as Python hands them over
    nested_id = tmp_path / "nested_id.toml"
    nested_id.write_text(
        f'database = "sqlite:///{tmp_path}/x.db"\n[sources.signed]\nscheme = "hmac"\n'
        f'secret_env = "{SECRET_ENV}"\n[sources.signed.hmac]\nheader = "x-sig"\n'
        'id_pointer = "/event/id"\n'
    )
    cases: list[tuple[Call, str, int]] = [
        ((rows.config, ("deliveries", "list", "--limit", "0")), "invalid_argument", 2),
        ((rows.config, ("bogus",)), "invalid_argument", 2),
        ((rows.config, ("deliveries", "list", "--where", not_utf8)), "invalid_argument", 2),
        ((directory, ("deliveries", "list")), "config_error", 2),
        ((latin1, ("deliveries", "list")), "config_error", 2),
        ((bad_url, ("config", "check")), "config_error", 2),
        ((rows.config, ("serve", "--port", "99999")), "invalid_argument", 2),
        ((rows.config, ("send", "--data", "[" * 100_000)), "invalid_argument", 2),
        ((rows.config, ("send", "--data", '{"x": NaN}')), "invalid_argument", 2),
        ((rows.config, ("send", "--url", "http://[::1")), "invalid_argument", 2),
        ((rows.config, ("send", "--id", "\u00e9vt_1")), "invalid_argument", 2),
        ((rows.config, ("dlq", "list", "--limit", "9" * 23)), "invalid_argument", 2),
        ((rows.config, ("reviews", "resolve", "9" * 23, "--note", "x")), "invalid_argument", 2),
        ((rows.config, ("deliveries", "list", "--since", "4102444800000")), "invalid_argument", 2),
        ((rows.config, ("deliveries", "list", "--before", "garbage")), "invalid_argument", 2),
        ((rows.config, ("rejected", "list", "--before", "garbage")), "invalid_argument", 2),
        ((rows.config, ("serve", "--host", "256.1.1.1")), "invalid_argument", 2),
        ((bad_host, ("serve",)), "config_error", 2),
        (
            (rows.config, ("resources", "create", "audio", "--owner", "o", *TENANT_T)),
            "invalid_argument",
            2,
        ),
        ((rows.config, (*CREATE, "--tenant", "")), "invalid_argument", 2),
        ((rows.config, (*CREATE, *TENANT_T, "--source", "a,b")), "invalid_argument", 2),
        ((rows.config, (*CREATE, *TENANT_T, "--source", "nobody")), "unknown_source", 4),
        ((rows.config, (*CREATE, "--tenant", "ac\nme")), "invalid_argument", 2),
        ((rows.config, (*CREATE, "--tenant", "acme\n")), "invalid_argument", 2),
        ((rows.config, (*CREATE, "--tenant", "x" * 100_000)), "invalid_argument", 2),
        ((no_file, ("config", "check")), "config_error", 2),
        ((read_only, ("config", "check")), "config_error", 2),
        ((in_memory, ("config", "check")), "config_error", 2),
        ((rows.config, ("replay", NO_DELIVERY, "--wait", "30d")), "invalid_argument", 2),
        ((rows.config, ("replay", NO_DELIVERY, "--wait", "9" * 400)), "invalid_argument", 2),
        ((rows.config, ("send",)), "invalid_argument", 2),
        ((nested_id, ("send", "--data", '{"event": 1}')), "invalid_argument", 2),
        ((rows.config, (*PAUSE, "v2\nsig")), "invalid_argument", 2),
        ((rows.config, (*PAUSE, "x" * 201)), "invalid_argument", 2),
    ]
    #: What the line must name, where that is the point of the case.
    names: dict[Call, str] = {
        (rows.config, ("serve", "--host", "256.1.1.1")): "--host: cannot listen on 256.1.1.1:",
        (bad_host, ("serve",)): "server.host: cannot listen on 256.1.1.1:",
        (no_file, ("config", "check")): "database: the SQLite URL names no file",
        (read_only, ("config", "check")): "database: the SQLite URL asks for mode=ro",
        (in_memory, ("config", "check")): "database: the SQLite URL names an in-memory store",
        (rows.config, ("replay", NO_DELIVERY, "--wait", "30d")): "Invalid value for '--wait': "
        "longer than 1h",
        (rows.config, ("send",)): "--source: name one of the sources: ",
        (nested_id, ("send", "--data", '{"event": 1}')): "--data: /event/id passes through "
        "a value that is not an object",
        (rows.config, (*PAUSE, "v2\nsig")): "the reason is not valid",
    }
    done = hookinbox_all([call for call, _, _ in cases])
    for (call, code, exit_code), ran in zip(cases, done, strict=True):
        assert ran.returncode == exit_code, (call[1][:2], ran.stderr[-300:])
        (line,) = ran.stderr.splitlines()
        assert line.startswith(f"hookinbox: {code}: {names.get(call, '')}"), (call[1][:2], line)
        assert "s3cret" not in ran.stderr + ran.stdout


def test_an_owner_is_held_to_the_tenants_rule(rows: Rows) -> None:
    """An owner is matched against what an event claims and shown in every list and
    notification, as the tenant is: a line break, a control character or 100,000
    characters would be stored and shown as they came."""
    refused = [" ", " user-7", "user-7 ", "user\n7", "user-7\n", "tab\tx", "c\x9b1", "x" * 201]
    taken = ["x" * 200, "user 7", "ünïcode@example.com"]
    calls = [(rows.config, (*CREATE, *TENANT_T, "--owner", owner)) for owner in refused + taken]
    done = hookinbox_all(calls)
    for owner, ran in zip(refused, done, strict=False):
        assert (ran.returncode, ran.stdout) == (2, ""), (owner, ran.stderr)
        (line,) = ran.stderr.splitlines()
        assert line == (
            "hookinbox: invalid_argument: owner: "
            "1 to 200 printable characters, no leading or trailing space"
        ), (owner, line)
    for owner, ran in zip(taken, done[len(refused) :], strict=True):
        assert ran.returncode == 0, (owner, ran.stderr)
        assert owner in ran.stdout, (owner, ran.stdout)


def test_a_ref_no_event_could_carry_is_refused_naming_the_ref(rows: Rows) -> None:
    """An event's reference is storable text (at most 255 UTF-8 bytes, no control
    character): a resource created or attached with a line break in its reference, or
    more than an event can carry, would be stored and never matched by any event. No
    provider pads a reference with spaces: a padded one is a slip, refused too."""
    refused = ["task\n1", "task_1\n", "tab\tx", "c\x9b1", " task_1", "task_1 ", "x" * 256]
    refused.append("\u00e9" * 128)  # 128 characters, 256 bytes
    taken = ["x" * 255, "\u00e9" * 127, "gs://bucket/a b.mp4", TASK.replace("task_", "vid_")]
    calls = [(rows.config, (*CREATE, *TENANT_T, "--ref", ref)) for ref in refused + taken]
    (resource_id,) = rows.ids["resources"]
    calls += [(rows.config, ("resources", "attach", resource_id, ref)) for ref in refused[:2]]
    done = hookinbox_all(calls)
    said = (
        "hookinbox: invalid_argument: provider_ref: printable text of 1 to 255 bytes "
        "(UTF-8), no leading or trailing space"
    )
    attached = done[len(refused) + len(taken) :]
    for ref, ran in [*zip(refused, done, strict=False), *zip(refused, attached, strict=False)]:
        assert (ran.returncode, ran.stdout) == (2, ""), (ref, ran.stderr)
        (line,) = ran.stderr.splitlines()
        assert line == said, (ref, line)
    for ref, ran in zip(taken, done[len(refused) :], strict=False):
        assert ran.returncode == 0, (ref, ran.stderr)
        assert ref in ran.stdout, (ref, ran.stdout)


#: A command with an option given empty, each option that filters, picks or points.
EMPTY_VALUES: list[tuple[str, ...]] = [
    ("send", "--url", ""),
    ("send", "--url", " "),
    ("send", "--source", ""),
    ("serve", "--host", ""),
    *[("deliveries", "list", flag, "") for flag in ("--id", "--source", "--type", "--since")],
    *[("deliveries", "list", flag, "") for flag in ("--until", "--where", "--before")],
    ("deliveries", "show", EVENTS[0][0], "--source", ""),
    ("dlq", "list", "--source", ""),
    ("dlq", "list", "--since", ""),
    *[("dlq", "retry", "--all", "--dry-run", flag, "") for flag in ("--source", "--action")],
    *[("dlq", "retry", "--all", "--dry-run", flag, "") for flag in ("--reason", "--since")],
    ("dlq", "retry", "--all", "--dry-run", "--until", ""),
    ("rejected", "list", "--source", ""),
    ("rejected", "list", "--before", ""),
    ("rejected", "retry", "--all", "--limit", "1", "--source", ""),
    ("catch-up", "--source", ""),
    ("catch-up", "--since", ""),
    ("replay", EVENTS[0][0], "--source", ""),
    ("replay", EVENTS[0][0], "--action", ""),
    ("replay", "--outbox", ""),
    ("trace", EVENTS[0][0], "--source", ""),
    ("reviews", "list", "--tenant", ""),
    ("reviews", "list", "--source", ""),
    *[("resources", "list", flag, "") for flag in ("--kind", "--tenant", "--state", "--before")],
    (*CREATE, *TENANT_T, "--ref", ""),
    (*CREATE, *TENANT_T, "--source", ""),
    ("outbox", "list", "--kind", ""),
    ("sources", "pause", "stripe", "--reason", ""),
    ("sources", "pause", "stripe", "--reason", " "),
]


def test_an_empty_value_is_refused_not_read_as_the_option_left_out(rows: Rows) -> None:
    """``--source ''`` (an unset shell variable) would otherwise list every source's
    rows, send to the config's server, replay every action, store an empty reason."""
    done = hookinbox_all([(rows.config, args) for args in EMPTY_VALUES])
    for args, ran in zip(EMPTY_VALUES, done, strict=True):
        assert (ran.returncode, ran.stdout) == (2, ""), (args, ran.stdout, ran.stderr)
        (line,) = ran.stderr.splitlines()
        flag = args[-2]
        assert line.startswith(
            f"hookinbox: invalid_argument: Invalid value for '{flag}': empty: "
        ), (args, line)


def commands(
    command: click.Command, parent: click.Context | None, name: str
) -> Iterator[click.Context]:
    ctx = click.Context(command, info_name=name, parent=parent)
    yield ctx
    if isinstance(command, click.Group):
        for sub in command.list_commands(ctx):
            found = command.get_command(ctx, sub)
            assert found is not None
            yield from commands(found, ctx, sub)


#: RST and markdown code (``x``, `x`), bold, Sphinx roles, rich tags or a bare config
#: table in brackets ([bold], [rejected]), a Python dict or repr, click's raw \b.
MARKUP = re.compile(r"``|`|\*\*|:[a-z]+:|\[/?[a-z_.]+\]|\{'|\\b|<class ")


def test_no_help_text_holds_markup() -> None:
    seen = 0
    for ctx in commands(cli_main, None, "hookinbox"):
        text = ctx.command.get_help(ctx).replace("[required]", "")
        marked = [line for line in text.splitlines() if MARKUP.search(line)]
        assert not marked, (ctx.command_path, marked)
        seen += 1
    assert seen > 30
