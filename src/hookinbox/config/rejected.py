"""``[rejected]``: deliveries refused for their signature or timestamp, kept for a while.

A delivery refused as ``invalid_signature`` or ``timestamp_out_of_tolerance`` is gone for
the provider (GitHub never redelivers by itself): after a bad secret rotation, the only
copy is the one that reached hookinbox. So, by default, such a refusal is kept -- bounded,
and never a credential -- long enough for an operator to fix the secret and run
``hookinbox rejected retry``, which checks the signature again with the current secrets::

    [rejected]
    keep = true                     # default on
    retention = "72h"               # then purged (hookinbox purge, and serve's purge loop)
    max_body_bytes = 65536          # a larger body is counted, not kept (cannot be retried)
    max_rows_per_source = 500       # a ring per source: the oldest goes first
    max_bytes_per_source = 16777216 # bodies + headers per source, the same ring
    per_minute = 60                 # rows written per source and process per minute

A flood of forged requests cannot grow the store: writes are rate-limited per source in
memory before any store work, a burst beyond a few writes in flight is dropped, repeats of
one body update one row, and each source's rows are a ring bounded in rows and bytes.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from hookinbox.config.fields import Frozen, parse_duration


class RejectedSettings(Frozen):
    #: Keep refused deliveries (signature and timestamp reasons) for a retry.
    keep: bool = True
    #: How long a kept rejected delivery stays (from the last time it was seen).
    retention: float = Field(default=72 * 3600.0, gt=0, le=90 * 86400.0)
    #: A body larger than this is counted but not kept (it could not be verified again).
    max_body_bytes: int = Field(default=65_536, ge=0, le=16 * 1_048_576)
    #: Rows kept per source; a new one replaces the least recently seen.
    max_rows_per_source: int = Field(default=500, ge=1, le=100_000)
    #: Bytes (bodies and headers) kept per source, the same ring.
    max_bytes_per_source: int = Field(default=16 * 1_048_576, ge=1024, le=1024 * 1_048_576)
    #: Rows written per source and process per minute; beyond, refusals are only counted.
    per_minute: int = Field(default=60, ge=1, le=100_000)

    @field_validator("retention", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float:
        return parse_duration(value)

    @model_validator(mode="after")
    def _body_fits(self) -> RejectedSettings:
        if self.max_body_bytes > self.max_bytes_per_source:
            raise ValueError("max_body_bytes must be at most max_bytes_per_source")
        return self
