"""Erasure by data subject: ``hookinbox erase --subject cus_123`` and ``POST /erasures``.

A source that names its subject (``subject = "/data/object/customer"``) stores the
subject's keyed hash with each delivery and kept refusal. An erasure hashes the value
the operator gives with the same ``[privacy]`` key, then, in bounded batches (one short
transaction each, paced like a purge), deletes those deliveries' payloads, clears their
attempts' answer snippets and drops the bodies of the subject's kept refusals. The
journal rows stay (ids, event ids, body hashes, the subject hash), so a provider's later
retry of an erased event is still a duplicate, and a second erase finds a snippet a
forward in flight wrote after the first. One audit row records the erasure with the
subject's hash and the counts; the value itself is never stored, logged or audited.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hookinbox.config import Config
from hookinbox.errors import InvalidArgument, UnknownSource
from hookinbox.ops.purge import BatchPacer
from hookinbox.redaction import keyed_hash
from hookinbox.store import Store, SubjectData

#: The longest subject value accepted (an id or an e-mail address, not a document).
MAX_SUBJECT_LENGTH = 1000


@dataclass(frozen=True, slots=True)
class ErasureResult:
    """What an erasure found (``found``, counted before it ran) and what it took out."""

    dry_run: bool
    source: str | None
    #: The subject's keyed hash: what the journal and the audit hold instead of the value.
    subject_hash: str
    found: SubjectData
    payloads: int = 0
    snippets: int = 0
    rejected_bodies: int = 0
    batches: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "source": self.source,
            "subject_hash": self.subject_hash,
            "found": self.found.as_json(),
            "erased": {
                "payloads": self.payloads,
                "snippets": self.snippets,
                "rejected_bodies": self.rejected_bodies,
            },
            "batches": self.batches,
        }


def subject_hash_of(config: Config, subject: str) -> str:
    """The keyed hash a delivery of ``subject`` was stored with; InvalidArgument for an
    empty or oversized value, ConfigError when the key is not in the environment."""
    if not subject or not subject.strip():
        raise InvalidArgument("the subject is empty")
    if len(subject) > MAX_SUBJECT_LENGTH:
        raise InvalidArgument(f"the subject is longer than {MAX_SUBJECT_LENGTH} characters")
    return keyed_hash(config.privacy.hash_key(), subject)


async def erase_subject(
    store: Store,
    config: Config,
    *,
    subject: str,
    source: str | None = None,
    dry_run: bool = False,
    batch: int | None = None,
    actor: str,
) -> ErasureResult:
    """Erase (or with ``dry_run`` count) the subject's payloads, answer snippets and kept
    refusals' bodies, of one source or all; audited once as ``erase`` when it ran."""
    size = batch if batch is not None else config.operations.purge_batch
    if size < 1:
        raise InvalidArgument("--batch must be at least 1")
    if source is not None and not source.strip():
        raise InvalidArgument("the source is empty")
    hashed = subject_hash_of(config, subject)
    found = await store.erasure.find_subject(hashed, source)
    held = found.deliveries or found.rejected_bodies
    if source is not None and config.source(source) is None and not held:
        # A mistyped source would erase nothing and look done; a source taken out of the
        # config whose deliveries are still stored is erased as any other.
        raise UnknownSource(
            f"no source named {source!r} in the config, and nothing of it stored holds this subject"
        )
    if dry_run:
        return ErasureResult(True, source, hashed, found)
    pacer = BatchPacer(config, size)
    payloads = snippets = rejected = batches = 0
    while True:
        done = await pacer.run(
            pacer.size, lambda rows: store.erasure.erase_delivery_batch(hashed, source, rows)
        )
        if done.deliveries == 0:
            break
        batches += 1
        payloads += done.payloads
        snippets += done.snippets
        if done.payloads == 0 and done.snippets == 0:
            break  # nothing came out (cannot happen: the batch only finds data left)
    while True:
        dropped = await pacer.run(
            pacer.size, lambda rows: store.erasure.erase_rejected_batch(hashed, source, rows)
        )
        if dropped == 0:
            break
        batches += 1
        rejected += dropped
    report = ErasureResult(False, source, hashed, found, payloads, snippets, rejected, batches)
    await store.audit.record_operator_action(
        actor=actor,
        command="erase",
        source=source,
        detail=(
            f"subject_hash:{hashed} deliveries:{found.deliveries} payloads:{payloads} "
            f"snippets:{snippets} rejected_bodies:{rejected}"
        ),
    )
    return report
