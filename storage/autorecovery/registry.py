"""Which bookies are registered now (writable or read-only): a bookie is lost when its
ephemeral registration under `/ledgers/available` is gone (its lease expired)."""

from __future__ import annotations

from metastore.repositories import BookieRegistrations
from metastore.versioned_keys import VersionedKeys


async def registered_bookies(keys: VersionedKeys) -> frozenset[str]:
    registrations = BookieRegistrations(keys.store)
    writable = await registrations.names(readonly=False)
    return frozenset(writable) | frozenset(await registrations.names(readonly=True))
