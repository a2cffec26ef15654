"""A logout ends the session in every process on the store, not only in the one that
served it (each `Inbox` below is what one `serve` process or host builds)."""

from __future__ import annotations

import httpx

from hookinbox.admin.auth import COOKIE, StoreRevocations
from hookinbox.store import open_store_for
from tests.admin.support import admin_config, login
from tests.support.inbox import running_inbox


def csrf_of(page: str) -> str:
    return page.split('name="csrf" value="', 1)[1].split('"', 1)[0]


async def test_a_logout_in_one_process_ends_the_session_in_another(db_url: str) -> None:
    config = admin_config(db_url)
    async with (
        running_inbox(config, run_workers=False) as first,
        running_inbox(config, run_workers=False) as second,
        httpx.AsyncClient() as client,
    ):
        await login(client, first.base_url)
        copied = client.cookies[COOKIE]
        async with httpx.AsyncClient(cookies={COOKIE: copied}) as elsewhere:
            before = await elsewhere.get(f"{second.base_url}/admin/", follow_redirects=False)
            page = await client.get(f"{first.base_url}/admin/")
            out = await client.post(
                f"{first.base_url}/admin/logout",
                data={"csrf": csrf_of(page.text)},
                follow_redirects=False,
            )
            after = await elsewhere.get(f"{second.base_url}/admin/", follow_redirects=False)
    assert before.status_code == 200
    assert out.status_code == 303
    assert after.status_code == 303
    assert after.headers["location"].startswith("/admin/login")


async def test_a_revocation_is_kept_until_its_session_would_have_expired(db_url: str) -> None:
    store = open_store_for(db_url)
    await store.open()
    try:
        now = [1_000.0]
        revocations = StoreRevocations(store.admin_sessions, clock=lambda: now[0])
        await revocations.revoke("0123456789abcdef", until=now[0] + 3600)
        await revocations.revoke("0123456789abcdef", until=now[0] + 3600)  # twice: no error
        await revocations.revoke("fedcba9876543210", until=now[0] - 5)  # already expired
        kept = await revocations.is_revoked("0123456789abcdef")
        expired = await revocations.is_revoked("fedcba9876543210")
        never = await revocations.is_revoked("aaaaaaaaaaaaaaaa")
    finally:
        await store.close()
    assert (kept, expired, never) == (True, False, False)
