"""The forward contract: the raw body, its content type and the provider's headers, once,
with Idempotency-Key = the job's stable id; any 2xx is success, anything else a failed
attempt with a short code. Both stores."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from hookinbox import ActionError
from hookinbox.config import Config
from hookinbox.work.actions import Event, ForwardAction
from tests.support.inbox import make_config, running_inbox
from tests.support.processes import free_port
from tests.support.signing import delivery
from tests.support.target import RecordingTarget
from tests.support.waiting import wait_for_status


def forward_config(db_url: str, url: str, timeout: float = 5.0, **worker: Any) -> Config:
    """``timeout``: the forward's; long enough by default that a loaded machine does not
    turn a forward meant to succeed into a timed-out attempt and a second POST."""
    return make_config(
        db_url,
        routes=[
            {"events": ["*"], "action": "relay", "forward": url, "forward_timeout_seconds": timeout}
        ],
        worker={"max_attempts": 2, "backoff_base_seconds": 0.1, **worker},
    )


async def test_a_forward_gets_the_raw_body_headers_and_the_jobs_stable_id(
    db_url: str, client: httpx.AsyncClient
) -> None:
    body, headers = delivery("evt_fwd", "order.paid", amount=42)
    with RecordingTarget() as target:
        async with running_inbox(forward_config(db_url, target.url)) as inbox:
            answer = await client.post(
                inbox.url(), content=body, headers={**headers, "authorization": "Bearer x"}
            )
            await wait_for_status(inbox.store, "evt_fwd", "completed")
            found = await inbox.store.journal.get_delivery("evt_fwd")
    assert found is not None
    (request,) = target.requests
    sent = request["headers"]
    assert request["body"] == body  # byte for byte: the target can verify it again
    assert sent["content-type"] == "application/json"
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        assert sent[name] == headers[name]
    job_id = f"{answer.json()['delivery_id']}:relay"
    assert sent["idempotency-key"] == job_id == found.jobs[0].id
    assert sent["x-hookinbox-event-id"] == "evt_fwd"
    assert sent["x-hookinbox-event-type"] == "order.paid"
    assert "authorization" not in sent  # never passed on
    assert found.jobs[0].business_id == "internal-1"  # the target's {"id": ...}


async def test_a_non_2xx_answer_is_a_failed_attempt_retried_under_the_same_key(
    db_url: str, client: httpx.AsyncClient
) -> None:
    body, headers = delivery("evt_503")
    with RecordingTarget(statuses=[503]) as target:
        async with running_inbox(forward_config(db_url, target.url)) as inbox:
            await client.post(inbox.url(), content=body, headers=headers)
            await wait_for_status(inbox.store, "evt_503", "completed")
            found = await inbox.store.journal.get_delivery("evt_503")
            assert found is not None
            history = await inbox.store.queue.list_attempts(found.jobs[0].id)
    assert [(a.outcome, a.error_code) for a in history] == [
        ("retry", "http_503"),
        ("completed", None),
    ]
    keys = {r["headers"]["idempotency-key"] for r in target.requests}
    assert len(target.requests) == 2 and len(keys) == 1


@pytest.mark.parametrize("failure", ["timeout", "connect_error", "http_400"])
async def test_timeouts_refusals_and_errors_end_in_dead_letters_with_their_code(
    db_url: str, client: httpx.AsyncClient, failure: str
) -> None:
    body, headers = delivery(f"evt_{failure}")
    statuses = [400, 400] if failure == "http_400" else []
    with RecordingTarget(statuses=statuses, delay=2.0 if failure == "timeout" else 0) as target:
        url = f"http://127.0.0.1:{free_port()}/gone" if failure == "connect_error" else target.url
        async with running_inbox(forward_config(db_url, url, timeout=0.5)) as inbox:
            await client.post(inbox.url(), content=body, headers=headers)
            await wait_for_status(inbox.store, f"evt_{failure}", "failed")
            found = await inbox.store.journal.get_delivery(f"evt_{failure}")
    assert found is not None
    assert (found.jobs[0].attempts, found.jobs[0].last_error) == (2, failure)


async def test_a_name_that_does_not_resolve_is_a_dns_error() -> None:
    def unresolvable(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno -2] Name or service not known", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(unresolvable)) as http:
        action = ForwardAction("http://internal.example/hooks", 1.0, http)
        event = Event("dlv_1", "s", "evt", "t", {}, b"{}", {}, 1)
        with pytest.raises(ActionError) as caught:
            await action.send(event, "dlv_1:relay")
    assert caught.value.code == "dns_error"


async def test_a_replayed_forward_does_not_post_again_unless_its_effects_are_forced(
    db_url: str, client: httpx.AsyncClient
) -> None:
    from hookinbox.ops import replay

    body, headers = delivery("evt_replayed")
    with RecordingTarget() as target:
        config = forward_config(db_url, target.url)
        async with running_inbox(config) as inbox:
            answer = await client.post(inbox.url(), content=body, headers=headers)
            await wait_for_status(inbox.store, "evt_replayed", "completed")
            delivery_id = answer.json()["delivery_id"]
            plain = await replay(inbox.store, config, delivery_id, actor="test", wait_seconds=10)
            assert len(target.requests) == 1
            forced = await replay(
                inbox.store, config, delivery_id, actor="test", force_effects=True, wait_seconds=10
            )
            assert len(target.requests) == 2
    assert "skipped" in str(plain.as_json()).lower()
    assert forced.as_json() != plain.as_json()


async def test_replaying_a_completed_forward_says_it_was_not_posted_again_unless_forced(
    db_url: str, client: httpx.AsyncClient
) -> None:
    """The report says what happened at the target, not what kind of route it was."""
    from hookinbox import ops

    body, headers = delivery("evt_replayed_fwd")
    with RecordingTarget() as target:
        config = forward_config(db_url, target.url)
        async with running_inbox(config) as inbox:
            answer = await client.post(inbox.url(), content=body, headers=headers)
            await wait_for_status(inbox.store, "evt_replayed_fwd", "completed")
            delivery_id = answer.json()["delivery_id"]
            again = await ops.replay(
                inbox.store, config, delivery_id, actor="test:replay", wait_seconds=10
            )
            (item,) = again.items
            assert (item.outcome, item.forwarded) == ("ran", False)
            assert item.effects_skipped == (f"forward:{delivery_id}:relay",)
            assert "forwarded again" not in item.summary()
            assert len(target.requests) == 1
            forced = await ops.replay(
                inbox.store,
                config,
                delivery_id,
                actor="test:replay",
                wait_seconds=10,
                force_effects=True,
            )
            (item,) = forced.items
            assert (item.outcome, item.forwarded) == ("ran", True)
            assert "forwarded again with the same Idempotency-Key" in item.summary()
    assert len(target.requests) == 2
    assert (
        target.requests[0]["headers"]["idempotency-key"]
        == (target.requests[1]["headers"]["idempotency-key"])
    )
