"""``hookinbox.testing``: a signed request per scheme that the scheme's own verifier
accepts, and the in-process inbox a user tests handlers with."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import time
from typing import Any

import pytest

from hookinbox.config import Source, config_from_mapping
from hookinbox.errors import ConfigError, InvalidSignature, TimestampOutOfTolerance
from hookinbox.testing import InboxTest, signed_request
from hookinbox.verify.registry import build_verifier
from tests.support.inbox import make_config
from tests.support.signing import SECRET, SECRET_ENV

HMAC = {
    "header": "X-Signature",
    "algorithm": "sha256",
    "encoding": "hex",
    "prefix": "sha256=",
    "timestamp_header": "X-Timestamp",
    "signed_content": "{timestamp}.{body}",
    "id_pointer": "/id",
    "type_pointer": "/type",
}
SCHEMES: dict[str, dict[str, Any]] = {
    "standard-webhooks": {},
    "stripe": {},
    "github": {},
    "shopify": {},
    "slack": {},
    "hmac": {"hmac": HMAC},
}


def _source(scheme: str) -> Source:
    options = {"scheme": scheme, "secret_env": SECRET_ENV, **SCHEMES[scheme]}
    return config_from_mapping({"sources": {"s": options}}).sources["s"]


def _body(scheme: str) -> dict[str, Any]:
    if scheme == "slack":
        return {"type": "event_callback", "event_id": "Ev1", "event": {"type": "message"}}
    return {"id": "evt_1", "type": "thing.happened", "object": "event", "data": {}}


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_a_signed_request_passes_its_schemes_verifier(scheme: str) -> None:
    source = _source(scheme)
    request = signed_request(source, _body(scheme), event_id="evt_1", event_type="thing.happened")
    headers = {k.lower(): v for k, v in request.headers.items()}
    event = build_verifier("s", source).verify(request.body, headers, now=time.time())
    assert event.event_id in ("evt_1", "Ev1")
    assert json.loads(request.body) == _body(scheme)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_a_signed_request_with_another_secret_or_an_old_timestamp_is_refused(scheme: str) -> None:
    source = _source(scheme)
    verifier = build_verifier("s", source)
    other = "whsec_" + "b" * 32 if scheme == "standard-webhooks" else "another-secret"
    forged = signed_request(source, _body(scheme), secret=other)
    with pytest.raises(InvalidSignature):
        verifier.verify(
            forged.body, {k.lower(): v for k, v in forged.headers.items()}, now=time.time()
        )
    if scheme in ("github", "shopify"):
        return  # these schemes sign no timestamp
    old = signed_request(source, _body(scheme), timestamp=time.time() - 3600)
    with pytest.raises(TimestampOutOfTolerance):
        verifier.verify(old.body, {k.lower(): v for k, v in old.headers.items()}, now=time.time())


async def test_inbox_test_answers_like_the_server_and_runs_jobs_when_told(
    sqlite_url: str,
) -> None:
    async with InboxTest(make_config(sqlite_url)) as box:
        first = await box.deliver("test", {"id": "evt_t", "type": "t"})
        again = await box.deliver("test", {"id": "evt_t", "type": "t"})
        forged = await box.deliver("test", {"id": "evt_f", "type": "t"}, secret="whsec_" + "a" * 32)
        unsigned = await box.deliver("test", b"{}", sign=False)
        before = await box.delivery("evt_t")
        jobs = await box.run_jobs()
        after = await box.delivery("evt_t")
        health = await box.client.get("/healthz")
        assert box.store is box.inbox.store
    assert [first.json()["status"], again.json()["status"]] == ["accepted", "duplicate"]
    assert (forged.status_code, forged.json()) == (400, {"error": "invalid_signature"})
    assert (unsigned.status_code, unsigned.json()) == (400, {"error": "missing_headers"})
    assert before is not None and before.status == "accepted"
    assert [job.state for job in jobs] == ["completed"]
    assert after is not None and (after.status, after.delivery_count) == ("completed", 2)
    assert health.status_code == 200


async def test_inbox_test_waits_for_a_retry_when_asked(sqlite_url: str) -> None:
    routes = [{"events": ["*"], "action": "flaky", "handler": "tests.library.handlers:flaky"}]
    config = make_config(sqlite_url, routes=routes, worker={"backoff_base_seconds": 0.05})
    async with InboxTest(config) as box:
        await box.deliver("test", {"id": "evt_flaky", "type": "t"})
        (job,) = await box.run_jobs(wait=5)
    assert job.state == "completed" and job.attempts > 1


def test_hookinbox_testing_imports_without_pytest() -> None:
    saved = {name: module for name, module in sys.modules.items() if name.startswith("_pytest")}
    try:
        sys.modules.pop("hookinbox.testing", None)
        sys.modules["pytest"] = None  # type: ignore[assignment]
        importlib.import_module("hookinbox.testing")
    finally:
        sys.modules["pytest"] = pytest
        sys.modules.update(saved)


def test_the_secret_comes_from_the_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    source = _source("standard-webhooks")
    assert signed_request(source, b"{}").headers["webhook-signature"].startswith("v1,")
    monkeypatch.delenv(SECRET_ENV)
    with pytest.raises(Exception, match=SECRET_ENV):
        signed_request(source, b"{}")
    assert SECRET


async def test_inbox_test_that_cannot_start_raises_and_leaves_no_temporary_file(
    sqlite_url: str,
) -> None:
    routes = [{"events": ["*"], "action": "a", "handler": "tests.library.handlers:wants_missing"}]
    box = InboxTest(make_config(sqlite_url, routes=routes))
    with pytest.raises(ConfigError, match="mailer"):
        async with box:
            pass
    assert box._tmp is not None
    assert not await asyncio.to_thread(os.path.exists, box._tmp.name)
