"""The generated pages of the documentation site, written from the code itself.

- ``reference/configuration.md``: every table of the config file, from the pydantic
  models in ``hookinbox.config`` (type, default, bounds, and the ``#:`` comment or
  docstring that documents each field in the source);
- ``reference/cli.md``: every command of ``hookinbox``, from the click commands' help;
- ``reference/operator-api.md``: every route of the JSON API under ``/api/v1``, from the
  OpenAPI document the server itself serves (``hookinbox.api.openapi_document``);
- ``changelog.md``: CHANGELOG.md at the repository root.

mkdocs runs this as a hook (``hooks:`` in mkdocs.yml): the pages are added to the site's
files in memory, never written into ``docs/``, so they cannot go stale in the tree.
``python scripts/docs_reference.py OUT_DIR`` writes them out, to read them without mkdocs.
"""

from __future__ import annotations

import inspect
import re
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import annotated_types
import click
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from hookinbox.api import ROUTES, openapi_document
from hookinbox.cli.main import main as cli_main
from hookinbox.config import Config
from hookinbox.config.catch_up import CatchUpSettings
from hookinbox.config.destinations import DestinationConfig
from hookinbox.config.encryption import EncryptionSettings
from hookinbox.config.filters import Condition
from hookinbox.config.model import Route, Server, Source, Worker
from hookinbox.config.notify import NotifierConfig
from hookinbox.config.operations import Operations
from hookinbox.config.rejected import RejectedSettings
from hookinbox.config.resources import MachineConfig, OutboxSettings, ResourceBinding
from hookinbox.config.schemes import (
    SCHEME_NAMES,
    CredentialsOptions,
    FingerprintPolicy,
    HmacOptions,
    SdkOptions,
    ShopifyOptions,
    StaticAnswer,
    TwilioOptions,
)
from hookinbox.config.telemetry import OtelSettings

REPO = Path(__file__).resolve().parents[1]

#: Each table of the file: its TOML header, the model, and a line saying what it is for.
TABLES: list[tuple[str, type[BaseModel], str]] = [
    ("(top level)", Config, "The file itself: the store and the tables below."),
    ("[server]", Server, "`hookinbox serve`: where it listens and how it batches reservations."),
    ("[worker]", Worker, "Workers: concurrency, retries, leases, the services handlers ask for."),
    ("[sources.NAME]", Source, "One webhook endpoint, `POST /webhooks/NAME`."),
    ("[[sources.NAME.routes]]", Route, "Which events of a source run which action."),
    ("sources.NAME.routes.filter = [...]", Condition, "One condition of a route's filter."),
    ("[sources.NAME.hmac]", HmacOptions, 'Options of `scheme = "hmac"`.'),
    ("[sources.NAME.shopify]", ShopifyOptions, 'Options of `scheme = "shopify"`.'),
    ("[sources.NAME.sdk]", SdkOptions, 'Options of `scheme = "sdk"`.'),
    ("[sources.NAME.twilio]", TwilioOptions, 'Options of `scheme = "twilio"`.'),
    (
        "[sources.NAME.credentials]",
        CredentialsOptions,
        'Options of `scheme = "basic"` and `scheme = "api-key"`.',
    ),
    ("[sources.NAME.answer]", StaticAnswer, "The body an accepted delivery is answered with."),
    ("[sources.NAME.fingerprint]", FingerprintPolicy, "The id of an event that has none."),
    (
        "[sources.NAME.catch_up]",
        CatchUpSettings,
        "Pulling what the provider's API still holds (docs/operations/catch-up.md).",
    ),
    (
        "[sources.NAME.routes.resource]",
        ResourceBinding,
        "A route that moves a tracked resource instead of running a handler.",
    ),
    ("[machines.NAME]", MachineConfig, "A state machine of tracked resources."),
    ("[outbox]", OutboxSettings, "The relay that sends outbox rows."),
    ("[operations]", Operations, "Dead-letter review, retention, purge, pause."),
    ("[rejected]", RejectedSettings, "Refused deliveries kept for a retry."),
    ("[notify.NAME]", NotifierConfig, "Where notices of dead letters, pauses, refusals go."),
    ("[otel]", OtelSettings, "OpenTelemetry traces (the extra `hookinbox[otel]`)."),
    (
        "[encryption]",
        EncryptionSettings,
        "Payloads, rejected bodies and answer snippets sealed at rest"
        " ([encryption at rest](../operations/encryption.md)).",
    ),
    (
        "[destinations.NAME]",
        DestinationConfig,
        "A forward destination: its rate, forwards in flight and circuit breaker.",
    ),
]


#: Fields validated against a list kept in the code: the list is written out from there.
ALLOWED: dict[tuple[type[BaseModel], str], tuple[str, ...]] = {(Source, "scheme"): SCHEME_NAMES}


# -- the configuration reference ----------------------------------------------------------
def field_comments(model: type[BaseModel]) -> dict[str, str]:
    """The ``#:`` comment lines right above each field in the model's source."""
    comments: dict[str, str] = {}
    pending: list[str] = []
    try:
        source = inspect.getsource(model)
    except (OSError, TypeError):
        return comments
    for line in source.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        match = re.match(r"^([a-z_][a-z0-9_]*)\s*:", stripped)
        own_field = match and line.startswith("    ") and not line.startswith("     ")
        if own_field and pending:
            comments[match.group(1)] = " ".join(pending)
        if stripped and not stripped.startswith("#"):
            pending = []
    return comments


def type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return type_name(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(arg) for arg in typing.get_args(annotation))
    if origin is typing.Literal:
        return " | ".join(f'"{arg}"' for arg in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(
            "..." if a is Ellipsis else type_name(a) for a in typing.get_args(annotation)
        )
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "none"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return f"table ({annotation.__name__})"
        return {"str": "string", "int": "integer", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation).replace("typing.", "")


def bounds(info: FieldInfo) -> str:
    words = []
    for item in info.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(item, attr, None)
            if isinstance(item, annotated_types.BaseMetadata) and value is not None:
                words.append(f"{sign} {value}")
        if getattr(item, "min_length", None) is not None:
            words.append(f"length ≥ {item.min_length}")
        if getattr(item, "max_length", None) is not None:
            words.append(f"length ≤ {item.max_length}")
        if getattr(item, "pattern", None):
            words.append(f"pattern `{item.pattern}`")
    return ", ".join(words)


def default_of(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "**required**"
    else:
        value = info.default
    if isinstance(value, BaseModel):
        return "its table's defaults"
    if value is None:
        return "unset"
    if value in ({}, ()):
        return "empty"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, tuple):
        return "`[" + ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in value) + "]`"
    return f"`{value}`"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def configuration_page() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Generated from the pydantic models in `hookinbox.config` when the site is built,",
        "so it is the code's own word. The file is TOML; every table is validated at start-up",
        "and an unknown key or a bad value stops `hookinbox serve` with one line naming the",
        "key (`sources.openai.routes.0.handler: ...`). Durations (`redelivery_window`,",
        '`key_retention`, ...) take `90`, `"90s"`, `"15m"`, `"72h"` or `"30d"`.',
        "Secrets never appear in the file: a source names the environment variable that holds",
        "them (`secret_env`), and a key such as `secret` or a value that looks like a secret is",
        "refused.",
        "",
    ]
    for header, model, purpose in TABLES:
        lines += [f"## `{header}`", "", purpose, ""]
        doc = model.__dict__.get("__doc__")
        if doc:
            lines += [inspect.cleandoc(doc), ""]
        comments = field_comments(model)
        lines += ["| key | type | default | bounds | what it is |", "|---|---|---|---|---|"]
        for field, info in model.model_fields.items():
            name = info.alias or field
            what = comments.get(field) or info.description or ""
            allowed = ALLOWED.get((model, field))
            if allowed:
                what = re.sub(r"[:,]? ?one of ``\w+``", "", what).rstrip(".")
                what += ": one of " + ", ".join(f"`{value}`" for value in allowed) + "."
            lines.append(
                f"| `{name}` | {cell(type_name(info.annotation))} | {cell(default_of(info))} | "
                f"{cell(bounds(info))} | {cell(what)} |"
            )
        lines.append("")
    return "\n".join(lines)


# -- the CLI reference ---------------------------------------------------------------------
def commands(
    command: click.Command, parent: click.Context | None, name: str
) -> Iterator[tuple[str, click.Context]]:
    ctx = click.Context(command, info_name=name, parent=parent, max_content_width=100)
    ctx.terminal_width = 100
    yield ctx.command_path, ctx
    if isinstance(command, click.Group):
        for sub in sorted(command.list_commands(ctx)):
            found = command.get_command(ctx, sub)
            if found is not None:
                yield from commands(found, ctx, sub)


def cli_page() -> str:
    lines = [
        "# Command line reference",
        "",
        "Generated from the click commands' own help when the site is built. Every command",
        "reads its config from `--config`, else `$HOOKINBOX_CONFIG`, else `./hookinbox.toml`;",
        "every error ends a command with one line on stderr and its exit code (2 config or",
        "bad argument, 3 store, 4 not found, 5 refused, 6 a port in use, 7 an encryption key",
        "missing from the ring): `hookinbox: CODE:",
        'message`, or, when the command was asked for JSON, the object `{"error": CODE, ...}`.',
        "",
        "A list command prints a table that fits the terminal (ids whole, relative times,",
        "the least needed columns left out when it is narrow); `--wide` shows every column",
        "with UTC times, `--format tsv` and `--format json` (`--json`) every column for",
        "programs. A bulk command (`dlq retry --all`, `rejected retry --all`) changes",
        "nothing without an explicit `--limit N`; a `--dry-run` needs none (it previews up",
        "to 100).",
        "",
    ]
    for path, ctx in commands(cli_main, None, "hookinbox"):
        level = "##" if path.count(" ") <= 1 else "###"
        lines += [f"{level} `{path}`", "", "```text", ctx.command.get_help(ctx), "```", ""]
    return "\n".join(lines)


def _schema_text(schema: dict[str, Any]) -> str:
    """A parameter's type in a few words: its type or enum, and its bounds."""
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    text = str(schema.get("type", "any"))
    for key, word in (("minimum", "≥"), ("maximum", "≤"), ("maxLength", "length ≤")):
        if key in schema:
            text += f", {word} {schema[key]}"
    return text


def operator_api_page() -> str:
    document = openapi_document(ROUTES)
    schemas = document["components"]["schemas"]
    lines = [
        "# Operator API reference",
        "",
        "Generated from the OpenAPI document the server serves at `/api/v1/openapi.json`",
        "(the same route specs validate every request). How to turn the API on, tokens,",
        "scopes and examples: [the JSON API](../operations/api.md).",
        "",
    ]
    for path, methods in document["paths"].items():
        for method, op in methods.items():
            lines += [f"## `{method.upper()} {path}`", "", op["summary"] + ".", ""]
            lines += [op["description"], ""]
            params = op["parameters"]
            if params:
                lines += ["| parameter | in | type | what |", "|---|---|---|---|"]
                for param in params:
                    lines.append(
                        f"| `{param['name']}` | {param['in']} | {_schema_text(param['schema'])}"
                        f" | {cell(param.get('description', ''))} |"
                    )
                lines.append("")
            body = op.get("requestBody")
            if body:
                ref = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
                props = schemas[ref].get("properties", {})
                lines += ["JSON body fields: " + ", ".join(f"`{k}`" for k in props) + ".", ""]
            answer = op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
            errors = ", ".join(code for code in op["responses"] if code != "200")
            lines += [f"Answers `{answer.rsplit('/', 1)[1]}`; errors {errors}.", ""]
    return "\n".join(lines)


def changelog_page() -> str:
    return (REPO / "CHANGELOG.md").read_text()


def pages() -> dict[str, str]:
    return {
        "reference/configuration.md": configuration_page(),
        "reference/cli.md": cli_page(),
        "reference/operator-api.md": operator_api_page(),
        "changelog.md": changelog_page(),
    }


# -- the mkdocs hook -----------------------------------------------------------------------
def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, content in pages().items():
        files.append(File.generated(config, path, content=content))
    return files


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "site-reference")
    for path, content in pages().items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_text(content)
        print(out / path)
