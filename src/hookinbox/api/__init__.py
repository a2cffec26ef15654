"""The JSON API under ``/api/v1``: the operator functions over HTTP, behind bearer
tokens with scopes, described by the OpenAPI document it serves."""

from __future__ import annotations

from hookinbox.api.routes import ROUTES, Api, api_routes
from hookinbox.api.spec import RouteSpec, openapi_document
from hookinbox.api.tokens import TOKENS_ENV, ApiToken, parse_tokens

__all__ = [
    "ROUTES",
    "TOKENS_ENV",
    "Api",
    "ApiToken",
    "RouteSpec",
    "api_routes",
    "openapi_document",
    "parse_tokens",
]
