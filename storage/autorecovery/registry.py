"""Which bookies are registered now (writable or read-only): a bookie is lost when its
ephemeral registration under `/ledgers/available` is gone (its lease expired)."""

from __future__ import annotations

from metastore import paths
from metastore.versioned_keys import VersionedKeys

READONLY = "readonly"


async def registered_bookies(keys: VersionedKeys) -> frozenset[str]:
    writable = [c for c in await keys.children(paths.BOOKIES_AVAILABLE) if c != READONLY]
    readonly = await keys.children(paths.join(paths.BOOKIES_AVAILABLE, READONLY))
    return frozenset(writable) | frozenset(readonly)
