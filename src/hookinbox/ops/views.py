"""What operators see beyond the pipeline's own layers and checks.

The capabilities an inbox is built with bring their own trace layers and reconcile checks
(tracked resources: transitions, outbox rows, four checks). They are handed in, never
registered at import: the inbox is built with an :class:`OperatorViews` (see
:func:`hookinbox.app.standard_operator_views`), and the CLI, the admin page and the API
pass the same one (built by the same function) to :func:`~hookinbox.ops.trace.trace` and
:func:`~hookinbox.ops.reconcile.reconcile`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hookinbox.ops.reconcile import ReconcileCheck
from hookinbox.ops.trace import TraceLayer


@dataclass(frozen=True, slots=True)
class OperatorViews:
    """Both fields have no default: a caller that forgot a capability fails here, at
    start-up, instead of showing less without a word."""

    #: Extra trace layers by name, shown after the pipeline's own.
    trace_layers: Mapping[str, TraceLayer]
    #: Every reconcile check to run, the pipeline's included.
    checks: Sequence[ReconcileCheck]
