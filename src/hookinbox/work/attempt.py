"""One attempt of a claimed job: run its action, and decide how the attempt settles.

The action runs under the pool's job timeout (:mod:`hookinbox.work.timeouts`); what it
met (its target, the status and a snippet of the answer, never the payload sent) goes
with the settlement. A failure goes to the route's retry policy
(:mod:`hookinbox.work.retry_policy`), whose decision names the settlement the store
takes. Nothing here writes to the store but the policy's count of a job's deferrals.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from hookinbox import sealing
from hookinbox.backoff import JITTER, backoff_seconds
from hookinbox.codes import JobCode, SettleOutcome, error_code_of
from hookinbox.config import Config
from hookinbox.errors import MalformedJson, TargetAnswered
from hookinbox.metrics import Metrics
from hookinbox.store import AttemptDetail, ClaimedJob, Settlement, Store
from hookinbox.tracing import Tracing
from hookinbox.verify.bodies import BodyReader
from hookinbox.work.actions import Action, Event
from hookinbox.work.effects import EffectInProgress, JobContext, JobSettled
from hookinbox.work.handlers import PayloadInvalid
from hookinbox.work.outcomes import report_unsettled
from hookinbox.work.retry_policy import Decision, Failure, RetryPolicy
from hookinbox.work.route_actions import build_retry_policies, build_targets
from hookinbox.work.timeouts import JobTimeouts

#: How an attempt ends: a settlement for the store, one the action made itself (a
#: resource route), or None (the store could not say how: the lease is left to expire).
Ended = Settlement | JobSettled | None


class AttemptRunner:
    """Runs one claimed job's action and turns how it ended into its settlement."""

    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        actions: Mapping[tuple[str, str], Action],
        metrics: Metrics,
        services: Mapping[str, Any],
        tracing: Tracing,
    ) -> None:
        self._settings = config.worker
        self._store = store
        self._actions = dict(actions)
        self._metrics = metrics
        self._services = services
        self._tracing = tracing
        #: Each route's retry policy (its schedule and dead-letter statuses), and the
        #: default one for a job whose route is gone.
        self._policies = build_retry_policies(config)
        self._default_policy = RetryPolicy.build(config.worker)
        #: What each attempt records as its target (a forward's host and path, a handler).
        self._targets = build_targets(config)
        #: Each source's stored body read as its receiver read it (JSON, or a form).
        self._bodies = BodyReader(config)
        self._timeouts = JobTimeouts(self._settings.job_timeout_seconds)

    async def run(self, job: ClaimedJob, started: float) -> Ended:
        """Run the job's action; how its attempt ends, with what it met (or what the action
        settled; None: the store could not say how, and the lease is left to expire)."""
        self._metrics.job_started(job.source, job.action)
        answered: list[JobContext] = []  # the job's context, for a forward's 2xx answer
        try:
            with self._tracing.attempt(job):
                # A hung action would otherwise hold its lease forever. (A sync handler's
                # thread cannot be stopped; the effects ledger keeps its effect single.)
                task = self._timeouts.watch()
                try:
                    result = await self._execute(job, answered)
                except asyncio.CancelledError:
                    if self._timeouts.done(task):
                        raise TimeoutError from None
                    raise
                finally:
                    self._timeouts.done(task)
        except (_Unrunnable, PayloadInvalid) as exc:
            failure = Failure(exc.code, final=True)
            return await self._failure(job, failure, self._detail(job, started))
        except EffectInProgress as exc:
            # Wait for another job without spending an attempt: at most a lease, since by
            # then its effect is recorded or its worker is gone.
            delay = min(self._settings.lease_seconds, self._backoff(job.attempts))
            detail = self._detail(job, started)
            return Settlement(
                job.id, job.lease_token, SettleOutcome.DEFERRED, exc.code, delay, detail=detail
            )
        except TimeoutError:
            failure = Failure(JobCode.JOB_TIMEOUT)
            return await self._failure(job, failure, self._detail(job, started))
        except Exception as exc:
            failure = Failure.of(exc, error_code_of(exc))
            return await self._failure(job, failure, self._detail(job, started, exc))
        if isinstance(result, JobSettled):
            return result
        detail = self._detail(job, started, answered=answered[0] if answered else None)
        completed = SettleOutcome.COMPLETED
        return Settlement(job.id, job.lease_token, completed, business_id=result, detail=detail)

    async def _failure(
        self, job: ClaimedJob, failure: Failure, detail: AttemptDetail
    ) -> Settlement | None:
        """The route's policy over a failed attempt, as its settlement: a retry, a wait
        that gives the attempt back (Retry-After, a held destination) or a dead letter."""
        try:
            decision = await self._decide(job, failure)
        except Exception as exc:
            # The lease will expire and the job comes back: nothing is lost.
            report_unsettled(job, failure.code, error_code_of(exc))
            return None
        return Settlement(
            job.id, job.lease_token, decision.outcome, decision.code, decision.delay, detail=detail
        )

    def _detail(
        self,
        job: ClaimedJob,
        started: float,
        exc: BaseException | None = None,
        *,
        answered: JobContext | None = None,
    ) -> AttemptDetail:
        """What the attempt met: its target, the status and a snippet of the target's
        answer (never the payload sent), and how long it took."""
        status, snippet = None, None
        if isinstance(exc, TargetAnswered):
            status, snippet = exc.status, exc.snippet or None
        elif answered is not None:
            status, snippet = answered.answer_status, answered.answer_snippet or None
        if snippet is not None:
            aad = sealing.snippet_aad(job.id, job.attempts)
            snippet = self._store.sealer.seal_text(job.source, snippet, aad)
        return AttemptDetail(
            target=self._targets.get((job.source, job.action)),
            http_status=status,
            snippet=snippet,
            duration_ms=round((time.monotonic() - started) * 1000),
        )

    async def _execute(
        self, job: ClaimedJob, answered: list[JobContext]
    ) -> str | JobSettled | None:
        action = self._actions.get((job.source, job.action))
        if action is None:
            raise _Unrunnable(JobCode.UNKNOWN_ACTION)
        if job.body is None:
            raise _Unrunnable(JobCode.PAYLOAD_PURGED)
        # A sealed body opened here, per job: a missing key fails this attempt as
        # ``key_unavailable`` (retried: the key may come back), never a garbled forward.
        body = self._store.sealer.open(job.body, sealing.payload_aad(job.delivery_id))
        try:
            payload = self._bodies.parse(job.source, body, job.headers)
        except MalformedJson:
            raise _Unrunnable(JobCode.MALFORMED_JSON) from None
        event = Event(
            delivery_id=job.delivery_id,
            source=job.source,
            event_id=job.event_id,
            type=job.event_type,
            payload=payload,
            body=body,
            headers=job.headers,
            attempt=job.attempts,
        )
        ctx = JobContext(
            store=self._store,
            job_id=job.id,
            delivery_id=job.delivery_id,
            attempt=job.attempts,
            trigger=job.trigger,
            lease_token=job.lease_token,
            services=self._services,
        )
        answered.append(ctx)
        ran = time.monotonic()
        try:
            result = await action.run(event, ctx)
            return ctx.settled if ctx.settled is not None else result
        finally:
            self._metrics.job_ran(job.source, job.action, time.monotonic() - ran)

    async def _decide(self, job: ClaimedJob, failure: Failure) -> Decision:
        """The route's policy over this failure (see work/retry_policy.py)."""
        policy = self._policies.get((job.source, job.action), self._default_policy)
        deferrals = 0
        if policy.asks_to_wait(failure):
            deferrals = await self._store.queue.count_target_deferrals(job.id)
        return policy.decide(
            failure, attempts=job.attempts, max_attempts=job.max_attempts, deferrals=deferrals
        )

    def _backoff(self, attempt: int) -> float:
        return backoff_seconds(
            attempt,
            base=self._settings.backoff_base_seconds,
            cap=self._settings.backoff_max_seconds,
            rng=JITTER,
        )


class _Unrunnable(Exception):
    """The job cannot succeed by being retried."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code
