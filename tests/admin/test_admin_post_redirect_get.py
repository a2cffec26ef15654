"""Issue 12, item 1: every admin action is post/redirect/get. A POST that ran answers 303
to a GET page; the outcome travels as a flash signed for the session; reloading that page
repeats nothing; a flash crafted by someone else is not shown."""

from __future__ import annotations

from urllib.parse import urlencode

import httpx

from tests.admin.support import FLAKY_ROUTE, admin_config, login
from tests.support.inbox import RunningInbox, running_inbox
from tests.support.journal import add_delivery, settle_all
from tests.support.signing import delivery
from tests.support.waiting import wait_for

FORM = {"content-type": "application/x-www-form-urlencoded"}


def csrf_of(page: str) -> str:
    return page.split('name="csrf" value="', 1)[1].split('"', 1)[0]


async def dead_letter(inbox: RunningInbox, client: httpx.AsyncClient, event_id: str) -> str:
    body, headers = delivery(event_id)
    assert (await client.post(inbox.url(), content=body, headers=headers)).status_code == 200

    async def failed() -> bool:
        found = await inbox.store.journal.get_delivery(event_id)
        return found is not None and found.status == "failed"

    await wait_for(failed, 15, f"{event_id} to dead-letter")
    found = await inbox.store.journal.get_delivery(event_id)
    assert found is not None
    return found.jobs[0].id


async def commands(inbox: RunningInbox, command: str) -> int:
    return sum(a.command == command for a in await inbox.store.audit.list_operator_actions())


async def test_every_action_answers_303_and_reloading_its_page_repeats_nothing(
    sqlite_url: str,
) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        job_id = await dead_letter(inbox, client, "evt_prg_1")
        await login(client, inbox.base_url)
        base = inbox.base_url
        csrf = csrf_of((await client.get(f"{base}/admin/sources")).text)
        delivery_id = job_id.rsplit(":", 1)[0]
        actions = [
            ("/admin/sources/test/pause", {"reason": "maintenance"}, "pause", "paused"),
            ("/admin/sources/test/resume", {}, "resume", "resumed"),
            ("/admin/dead-letters/retry", {"job_id": job_id}, "dlq-retry", "retried"),
            (f"/admin/deliveries/{delivery_id}/replay", {}, "replay", "replayed"),
        ]
        for path, form, command, word in actions:
            before = await commands(inbox, command)
            answer = await client.post(base + path, data={"csrf": csrf, **form})
            assert answer.status_code == 303, path
            assert before + 1 == await commands(inbox, command), path
            for _ in range(3):  # the page, then reloads of it
                page = await client.get(base + answer.headers["location"])
                assert page.status_code == 200 and word in page.text, path
            assert before + 1 == await commands(inbox, command), path


async def test_a_bulk_retry_is_a_get_selection_then_one_confirmed_post_then_a_get(
    sqlite_url: str,
) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        jobs = [await dead_letter(inbox, client, f"evt_bulk_{n}") for n in range(2)]
        await login(client, inbox.base_url)
        base = inbox.base_url
        selection = [("job_id", j) for j in jobs] + [("limit", "5")]
        confirm = await client.get(f"{base}/admin/dead-letters/confirm", params=selection)
        assert confirm.status_code == 200 and "Retry 2 dead letters?" in confirm.text
        assert await commands(inbox, "dlq-retry") == 0
        done = await client.post(
            f"{base}/admin/dead-letters/retry-selected",
            content=urlencode([*selection, ("confirm", "yes"), ("csrf", csrf_of(confirm.text))]),
            headers=FORM,
        )
        assert done.status_code == 303
        for _ in range(2):
            page = await client.get(base + done.headers["location"])
            assert "2 requeued" in page.text
        assert await commands(inbox, "dlq-retry") == 2
        # A POST without the confirmation retries nothing: it leads to the confirmation.
        unconfirmed = await client.post(
            f"{base}/admin/dead-letters/retry-selected",
            content=urlencode([*selection, ("csrf", csrf_of(confirm.text))]),
            headers=FORM,
        )
        assert unconfirmed.status_code == 303
        assert "/admin/dead-letters/confirm?" in unconfirmed.headers["location"]
        assert await commands(inbox, "dlq-retry") == 2


async def test_a_flash_not_signed_for_this_session_is_not_shown(sqlite_url: str) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        await login(client, inbox.base_url)
        base = inbox.base_url
        csrf = csrf_of((await client.get(f"{base}/admin/sources")).text)
        paused = await client.post(
            f"{base}/admin/sources/test/pause", data={"csrf": csrf, "reason": "x"}
        )
        genuine = await client.get(base + paused.headers["location"])
        assert 'id="flash"' in genuine.text
        forged = paused.headers["location"].replace("paused", "deleted")
        page = await client.get(base + forged)
        assert page.status_code == 200 and 'id="flash"' not in page.text
        async with httpx.AsyncClient() as other:  # someone else's session
            await login(other, base)
            page = await other.get(base + paused.headers["location"])
            assert 'id="flash"' not in page.text


async def test_an_action_the_operator_function_refuses_leads_back_with_the_reason(
    sqlite_url: str,
) -> None:
    """A double click: the second Retry finds the job no longer failed. Nothing changes,
    and the answer is still a 303 to a page that says why. No workers: with them the
    retried job (one attempt, a failing handler) could be a dead letter again before the
    second click, which would then rightly retry it."""
    config = admin_config(sqlite_url)
    async with (
        running_inbox(config, run_workers=False) as inbox,
        httpx.AsyncClient() as client,
    ):
        await add_delivery(inbox.store, "evt_twice", actions=(FLAKY_ROUTE["action"],))
        (job_id,) = await settle_all(inbox.store, "failed")
        await login(client, inbox.base_url)
        base = inbox.base_url
        csrf = csrf_of((await client.get(f"{base}/admin/dead-letters")).text)
        first = await client.post(
            f"{base}/admin/dead-letters/retry", data={"csrf": csrf, "job_id": job_id}
        )
        second = await client.post(
            f"{base}/admin/dead-letters/retry", data={"csrf": csrf, "job_id": job_id}
        )
        assert first.status_code == second.status_code == 303
        assert second.headers["location"].startswith("/admin/dead-letters?")
        page = await client.get(base + second.headers["location"])
        assert 'class="problem" id="flash"' in page.text and "not failed" in page.text
        assert await commands(inbox, "dlq-retry") == 1
        unknown = await client.post(f"{base}/admin/sources/nope/pause", data={"csrf": csrf})
        assert unknown.status_code == 303
        assert "unknown_source" in (await client.get(base + unknown.headers["location"])).text
