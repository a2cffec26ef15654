"""Catch-up: what a provider's API still holds, pulled into the journal through the same
reservation as a webhook (docs/operations/catch-up.md).

:mod:`~hookinbox.catch_up.run` is one run of one source; :mod:`~hookinbox.catch_up.schedule`
runs them every ``[sources.NAME.catch_up] every`` beside the workers; the providers'
clients are :mod:`~hookinbox.catch_up.stripe_events`,
:mod:`~hookinbox.catch_up.github_deliveries` and :mod:`~hookinbox.catch_up.svix_recover`
over the shapes of :mod:`~hookinbox.catch_up.provider`.
"""

from hookinbox.catch_up.run import CatchUpReport, run_catch_up
from hookinbox.catch_up.schedule import run_catch_up_schedule, scheduled_sources

__all__ = ["CatchUpReport", "run_catch_up", "run_catch_up_schedule", "scheduled_sources"]
