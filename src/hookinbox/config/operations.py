"""Config for the operator side: dead-letter review, retention, purge, reconcile, pause.

TOML (every key optional; durations as ``90s``, ``15m``, ``72h``, ``30d`` or seconds)::

    [operations]
    dlq_review_days = 7            # a dead letter should be looked at within this
    redelivery_window = "72h"      # the longest a provider retries (OpenAI: 72 hours)
    key_retention = "30d"          # journal keys; never shorter than redelivery_window
    payload_retention = "24h"      # raw bodies, after every job of the delivery completed
    purge_interval = "1h"          # background purge in `serve`; "off" or 0 disables
    purge_batch = 1000             # rows per purge transaction
    purge_pause = 3.0              # PostgreSQL: pause after each purge batch, x its own time
    purge_write_share = 0.15       # SQLite: most of the wall time a purge holds the write lock
    accepted_too_old = "1h"        # reconcile: accepted jobs / started effects older than this
    transition_review = "24h"      # reconcile: rejected transitions unreviewed longer than this
    pause_refresh_seconds = 2      # how often each receiver re-reads paused sources
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from hookinbox.config.fields import Frozen, parse_duration


class Operations(Frozen):
    #: A dead letter should be looked at within this many days (its review deadline).
    dlq_review_days: float = Field(default=7.0, gt=0, le=3650)
    #: The longest a provider retries a delivery (OpenAI: 72 hours).
    redelivery_window: float = Field(default=72 * 3600.0, ge=0)
    #: How long journal keys are kept; never shorter than any redelivery window.
    key_retention: float = Field(default=30 * 86400.0, gt=0)
    #: How long raw bodies are kept after every job of their delivery completed.
    payload_retention: float = Field(default=24 * 3600.0, ge=0)
    #: How often ``serve`` purges in the background; 0 (or "off") = never.
    purge_interval: float = Field(default=3600.0, ge=0)
    #: Rows deleted per purge transaction.
    purge_batch: int = Field(default=1000, ge=1, le=100_000)
    #: PostgreSQL: after each batch the purge pauses this many times as long as the batch
    #: took; 0 = no pause (a purge on a quiet store goes faster). At 3 a purge works a
    #: quarter of its wall time: receivers under load kept 0.97 of their rate while a
    #: day of a 3-million-row journal was deleted, 0.90 at 1 (docs/performance.md).
    purge_pause: float = Field(default=3.0, ge=0, le=100)
    #: SQLite: the most of its wall time a purge holds the single write lock. Batches are
    #: sized to hold it ~20 ms (at most ``purge_batch`` rows) and each is followed by a
    #: pause of ``held x (1 - share) / share`` (at least 0.1 s), so a receiver waiting on
    #: the lock commits between two batches; 1 = no pause.
    purge_write_share: float = Field(default=0.15, gt=0, le=1)
    #: Reconcile reports accepted jobs and started effects older than this.
    accepted_too_old: float = Field(default=3600.0, gt=0)
    #: Reconcile reports rejected transitions nobody reviewed within this.
    transition_review: float = Field(default=24 * 3600.0, gt=0)
    #: How often each receiver re-reads which sources are paused.
    pause_refresh_seconds: float = Field(default=2.0, gt=0, le=60)

    @field_validator(
        "redelivery_window",
        "key_retention",
        "payload_retention",
        "purge_interval",
        "accepted_too_old",
        "transition_review",
        mode="before",
    )
    @classmethod
    def _duration(cls, value: Any) -> float:
        if isinstance(value, str) and value.strip().lower() in ("off", "never", "none"):
            return 0.0
        return parse_duration(value)

    @model_validator(mode="after")
    def _keys_outlive_redelivery(self) -> Operations:
        if self.key_retention < self.redelivery_window:
            raise ValueError(
                "key_retention must be at least redelivery_window: a provider's late retry "
                "would otherwise look like a new event"
            )
        return self

    @property
    def dlq_review_seconds(self) -> float:
        return self.dlq_review_days * 86400.0
