"""A route's ``filter``: conditions on the body and on kept headers, all of which must hold.

::

    [[sources.stripe.routes]]
    events = ["invoice.*"]
    action = "live-invoices"
    forward = "http://billing.internal/stripe"
    filter = [
      { pointer = "/livemode", equals = true },
      { pointer = "/account", in = ["acct_1", "acct_2"] },
      { pointer = "/data/object/metadata/tenant", exists = true },
      { header = "x-shopify-shop-domain", glob = "*.myshopify.com" },
    ]

Each condition names what it reads -- ``pointer`` (a JSON pointer into the body, or a
form's field: ``/MessageStatus``) or ``header`` (a header kept with the delivery) -- and
one test: ``equals`` (a JSON value, compared as JSON: ``true`` is not ``1``), ``in`` (a
list of them), ``exists`` (``true``: present, ``false``: absent) or ``glob`` (a text
pattern, ``*`` and ``?``, case-sensitive; a value that is not text does not match). The
evaluation is :mod:`hookinbox.routing`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from hookinbox.config.fields import Frozen
from hookinbox.config.schemes import FORBIDDEN_HEADERS, check_header_name, check_pointer

#: The most conditions one route may have, and values one ``in`` may list.
MAX_CONDITIONS = 16
MAX_IN_VALUES = 256


class Condition(Frozen):
    """One test on one value of a delivery."""

    #: A JSON pointer into the body (``/data/object/livemode``), or
    pointer: str | None = None
    #: a header kept with the delivery (its content type, a provider header).
    header: str | None = None
    #: The value must equal this JSON value.
    equals: Any = None
    #: The value must equal one of these.
    in_: tuple[Any, ...] | None = Field(default=None, alias="in", max_length=MAX_IN_VALUES)
    #: ``true``: the value must be present; ``false``: absent.
    exists: bool | None = None
    #: The value must be text matching this pattern (``*``, ``?``, ``[...]``).
    glob: str | None = Field(default=None, min_length=1, max_length=500)

    @field_validator("pointer")
    @classmethod
    def _pointer(cls, value: str | None) -> str | None:
        return None if value is None else check_pointer(value)

    @field_validator("header")
    @classmethod
    def _header(cls, value: str | None) -> str | None:
        if value is None:
            return None
        name = check_header_name(value)
        if name in FORBIDDEN_HEADERS:
            raise ValueError(
                f"header {name!r} is a credential or a signature; routes never read it"
            )
        return name

    @model_validator(mode="after")
    def _one_subject_one_test(self) -> Condition:
        if (self.pointer is None) == (self.header is None):
            raise ValueError("a condition reads exactly one of 'pointer' or 'header'")
        tests = [
            "equals" in self.model_fields_set,
            self.in_ is not None,
            self.exists is not None,
            self.glob is not None,
        ]
        if sum(tests) != 1:
            raise ValueError("a condition has exactly one of 'equals', 'in', 'exists' or 'glob'")
        return self

    def describe(self) -> str:
        """``/livemode equals true``: for trace and logs (the configured values only)."""
        subject = self.pointer or f"header {self.header}"
        if self.exists is not None:
            return f"{subject} {'exists' if self.exists else 'is absent'}"
        if self.glob is not None:
            return f"{subject} matches {self.glob!r}"
        if self.in_ is not None:
            return f"{subject} in {list(self.in_)!r}"
        return f"{subject} equals {self.equals!r}"
