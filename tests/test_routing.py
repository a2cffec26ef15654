"""Content routing: a route's filter over the body and kept headers (config, evaluation)."""

from __future__ import annotations

from typing import Any

import pytest

from hookinbox.config import config_from_mapping
from hookinbox.config.filters import Condition
from hookinbox.errors import ConfigError
from hookinbox.routing import check_filters, first_failing, holds, json_equal
from hookinbox.verify.edge import is_kept_header

PAYLOAD: dict[str, Any] = {
    "livemode": True,
    "account": "acct_2",
    "count": 1,
    "data": {"object": {"metadata": {"tenant": "acme"}, "amount": 1.0}},
    "tags": ["a", "b"],
}
HEADERS = {"x-shopify-shop-domain": "acme.myshopify.com", "content-type": "application/json"}


def cond(**fields: Any) -> Condition:
    return Condition.model_validate(fields)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"pointer": "/livemode", "equals": True}, True),
        ({"pointer": "/livemode", "equals": 1}, False),  # true is not 1
        ({"pointer": "/count", "equals": True}, False),
        ({"pointer": "/count", "equals": 1.0}, True),
        ({"pointer": "/data/object/amount", "equals": 1}, True),
        ({"pointer": "/tags", "equals": ["a", "b"]}, True),
        ({"pointer": "/account", "in": ["acct_1", "acct_2"]}, True),
        ({"pointer": "/account", "in": ["acct_1"]}, False),
        ({"pointer": "/data/object/metadata/tenant", "exists": True}, True),
        ({"pointer": "/data/object/metadata/region", "exists": False}, True),
        ({"pointer": "/data/object/metadata/region", "equals": "eu"}, False),
        ({"pointer": "/account", "glob": "acct_*"}, True),
        ({"pointer": "/count", "glob": "*"}, False),  # not text
        ({"pointer": "/tags/1", "equals": "b"}, True),
        ({"header": "x-shopify-shop-domain", "glob": "*.myshopify.com"}, True),
        ({"header": "X-Shopify-Shop-Domain", "equals": "acme.myshopify.com"}, True),
        ({"header": "x-shopify-topic", "exists": False}, True),
    ],
)
def test_each_test_reads_one_value(fields: dict[str, Any], expected: bool) -> None:
    assert holds(cond(**fields), PAYLOAD, HEADERS) is expected


def test_json_equality_is_jsons() -> None:
    assert json_equal({"a": [1, True]}, {"a": [1.0, True]})
    assert not json_equal({"a": [1, True]}, {"a": [1, 1]})
    assert not json_equal("1", 1)
    assert not json_equal(False, 0)


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ({"equals": 1}, "exactly one of 'pointer' or 'header'"),
        ({"pointer": "/a", "header": "x-a", "equals": 1}, "exactly one of 'pointer' or 'header'"),
        ({"pointer": "/a"}, "exactly one of 'equals', 'in', 'exists' or 'glob'"),
        ({"pointer": "/a", "equals": 1, "glob": "x"}, "exactly one of 'equals'"),
        ({"pointer": "a", "equals": 1}, "is not a JSON pointer"),
        ({"header": "Authorization", "exists": True}, "is a credential or a signature"),
        ({"header": "stripe-signature", "exists": True}, "is a credential or a signature"),
        ({"pointer": "/a", "regex": "x"}, "regex: unknown key"),
    ],
)
def test_a_bad_filter_is_refused_at_start_up_naming_its_key(
    condition: dict[str, Any], message: str
) -> None:
    route = {"action": "a", "handler": "m:f", "filter": [condition]}
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({"sources": {"s": {"secret_env": "S", "routes": [route]}}})
    assert caught.value.message.startswith("sources.s.routes.0.filter.0")
    assert message in caught.value.message


def test_a_header_that_is_not_kept_is_refused_naming_its_key() -> None:
    route = {"action": "a", "handler": "m:f", "filter": [{"header": "x-tenant", "equals": "t"}]}
    config = config_from_mapping({"sources": {"s": {"secret_env": "S", "routes": [route]}}})
    with pytest.raises(ConfigError) as caught:
        check_filters(config, is_kept_header)
    assert caught.value.message.startswith("sources.s.routes.0.filter.0.header: 'x-tenant'")


def test_the_first_failing_condition_is_named() -> None:
    route = {
        "action": "a",
        "handler": "m:f",
        "filter": [{"pointer": "/livemode", "equals": True}, {"pointer": "/account", "in": ["x"]}],
    }
    config = config_from_mapping({"sources": {"s": {"secret_env": "S", "routes": [route]}}})
    (built,) = config.sources["s"].routes
    assert first_failing(built, PAYLOAD, HEADERS) == 1
    assert built.filter[1].describe() == "/account in ['x']"
