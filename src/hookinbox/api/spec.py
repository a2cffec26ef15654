"""Typed route specs, and the OpenAPI 3.1 document generated from them.

Each route of the API is one :class:`RouteSpec`: its method and path, the scope it
needs, and the models of its query, body and answer. The server validates requests with
those models and :func:`openapi_document` describes them, so the document served at
``/api/v1/openapi.json`` is the code's own description, never a copy kept by hand.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from hookinbox.api.call import Call
from hookinbox.api.models import PRINTABLE, Error
from hookinbox.api.tokens import Scope
from hookinbox.ops.search import MAX_TERM
from hookinbox.version import __version__

#: The error answers every route may give besides its own (the store down: 503).
COMMON_ERRORS = (400, 401, 403, 503)
_ERROR_TEXT = {
    400: "invalid_argument: a parameter or the body is not what this route takes",
    401: "unauthenticated: no valid bearer token",
    403: "forbidden: the token lacks the scope",
    404: "not_found, unknown_source",
    409: "refused, payload_purged, ambiguous_id (with the sources), catch_up_not_configured",
    502: "catch_up_failed, catch_up_unauthorized, catch_up_rate_limited: the provider's API",
    503: "store_unavailable: try again (Retry-After)",
}
_PATH_PARAM = re.compile(r"{(\w+)}")
_REF = "#/components/schemas/{model}"


@dataclass(frozen=True, slots=True)
class RouteSpec:
    method: str
    path: str  # under /api/v1, with {name} path parameters
    name: str  # the operationId
    summary: str
    scope: Scope
    answer: type[BaseModel]
    handler: Callable[[Call], Awaitable[Any]]
    query: type[BaseModel] | None = None
    body: type[BaseModel] | None = None
    errors: tuple[int, ...] = ()
    #: Whether a write: audited with the token's name as the actor.
    writes: bool = False


def _schema(model: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    """``model``'s schema and those it refers to, added to ``components`` under their
    titles (the class name unless ``model_config`` sets one), so a model class can be
    named apart from a namesake elsewhere in the package without renaming its schema."""
    schema = model.model_json_schema(ref_template=_REF)
    defs: dict[str, Any] = schema.pop("$defs", {})
    names = {name: found.get("title", name) for name, found in defs.items()}
    for name, found in defs.items():
        components[names[name]] = _renamed(found, names)
    components[schema["title"]] = _renamed(schema, names)
    return {"$ref": _REF.format(model=schema["title"])}


def _renamed(node: Any, names: dict[str, str]) -> Any:
    """``node`` with each ``$ref`` to a class name pointing at that schema's title."""
    if isinstance(node, list):
        return [_renamed(item, names) for item in node]
    if not isinstance(node, dict):
        return node
    prefix = _REF.format(model="")
    return {
        key: prefix + names.get(value.removeprefix(prefix), value.removeprefix(prefix))
        if key == "$ref" and isinstance(value, str) and value.startswith(prefix)
        else _renamed(value, names)
        for key, value in node.items()
    }


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter is absent or a string: never JSON null."""
    options = [s for s in schema.get("anyOf", []) if s.get("type") != "null"]
    if len(options) == 1:
        rest = {k: v for k, v in schema.items() if k not in ("anyOf", "default")}
        return {**options[0], **rest}
    return {k: v for k, v in schema.items() if k != "default"} | (
        {"default": schema["default"]} if schema.get("default") is not None else {}
    )


def _operation(spec: RouteSpec, components: dict[str, Any]) -> dict[str, Any]:
    parameters: list[dict[str, Any]] = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_TERM,
                "pattern": PRINTABLE,
            },
        }
        for name in _PATH_PARAM.findall(spec.path)
    ]
    if spec.query is not None:
        schema = spec.query.model_json_schema()
        required = set(schema.get("required", []))
        for name, prop in schema.get("properties", {}).items():
            shape = _not_null({k: v for k, v in prop.items() if k != "title"})
            param: dict[str, Any] = {
                "name": name,
                "in": "query",
                "required": name in required,
                "schema": shape,
            }
            if "description" in shape:
                param["description"] = shape["description"]
            parameters.append(param)
    responses: dict[str, Any] = {
        "200": {
            "description": "OK",
            "content": {"application/json": {"schema": _schema(spec.answer, components)}},
        }
    }
    error = _schema(Error, components)
    for status in sorted({*COMMON_ERRORS, *spec.errors}):
        responses[str(status)] = {
            "description": _ERROR_TEXT[status],
            "content": {"application/json": {"schema": error}},
        }
    operation: dict[str, Any] = {
        "operationId": spec.name,
        "summary": spec.summary,
        "description": f"Needs a token with the `{spec.scope}` scope."
        + (" Audited with the token's name as the actor." if spec.writes else ""),
        "parameters": parameters,
        "responses": responses,
    }
    if spec.body is not None:
        operation["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": _schema(spec.body, components)}},
        }
    return operation


def openapi_document(specs: list[RouteSpec], *, prefix: str = "/api/v1") -> dict[str, Any]:
    components: dict[str, Any] = {}
    paths: dict[str, dict[str, Any]] = {}
    for spec in specs:
        paths.setdefault(prefix + spec.path, {})[spec.method.lower()] = _operation(spec, components)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "hookinbox operator API",
            "version": __version__,
            "description": "The operator functions of the CLI and the admin page over HTTP: "
            "search deliveries, trace one, list and retry dead letters, replay, pause and "
            'resume sources, reconcile. Errors are {"error": code}.',
        },
        "paths": paths,
        "components": {
            "schemas": dict(sorted(components.items())),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
