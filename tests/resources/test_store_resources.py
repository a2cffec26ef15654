"""The resource part of the store contract, on both stores."""

from __future__ import annotations

import pytest

from hookinbox.errors import NotFound, OperationRefused
from hookinbox.resources.machine import VIDEO
from hookinbox.resources.service import Resources
from hookinbox.store import Store


async def test_create_attach_get_and_list(store: Store) -> None:
    resources = Resources(store, {"video": VIDEO})
    first = await resources.create("video", tenant="acme", owner="user-1")
    second = await resources.create("video", tenant="other", owner="user-9", provider_ref="p-2")
    assert (first.state, first.provider_ref, first.version) == ("submitted", None, 1)

    attached = await resources.attach_ref(first.id, "p-1")
    assert (attached.provider_ref, attached.version) == ("p-1", 2)
    assert (await resources.attach_ref(first.id, "p-1")).version == 2  # the same: a no-op
    found = await resources.find("video", "p-1")
    assert found is not None and found.id == first.id

    assert [r.id for r in await resources.list()] == [second.id, first.id]
    assert [r.id for r in await resources.list(tenant="acme")] == [first.id]
    assert [r.id for r in await resources.list(before=second.id)] == [first.id]
    # A result is handed only to its owner.
    assert await resources.get(first.id, tenant="acme", owner="user-1") is not None
    assert await resources.get(first.id, tenant="other") is None
    assert await resources.get(first.id, owner="user-9") is None

    log = await resources.transitions(first.id)
    assert [(t.outcome, t.from_state, t.to_state) for t in log] == [
        ("created", None, "submitted"),
        ("attached", "submitted", "submitted"),
    ]


async def test_a_provider_reference_belongs_to_one_resource_of_a_kind(store: Store) -> None:
    resources = Resources(store, {"video": VIDEO})
    holder = await resources.create("video", tenant="acme", owner="u", provider_ref="p-1")
    other = await resources.create("video", tenant="acme", owner="u")
    with pytest.raises(OperationRefused):
        await resources.create("video", tenant="acme", owner="u", provider_ref="p-1")
    with pytest.raises(OperationRefused):
        await resources.attach_ref(other.id, "p-1")
    with pytest.raises(OperationRefused):
        await resources.attach_ref(holder.id, "p-other")  # it has one already
    with pytest.raises(NotFound):
        await resources.attach_ref("res_missing", "p-3")
    again = await store.resources.get_resource(other.id)
    assert again is not None and again.provider_ref is None
    assert (await store.count_rows())["deliveries"] == 0


async def test_outbox_rows_requeue_and_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.outbox.requeue_outbox("video-ready:res_nope", only_failed=False)
    assert await store.outbox.get_outbox("video-ready:res_nope") is None
    assert await store.outbox.list_outbox() == []
    assert await store.outbox.claim_outbox("relay", 10, 5, 3) == []
    assert await store.resources.transition_counts() == {}
