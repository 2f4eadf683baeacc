"""Ledger metadata at Pulsar's hierarchical keys, with Pulsar's ledger manager semantics
(`PulsarLedgerManager` over `EtcdMetadataStore`):

- create is create-if-absent (`AlreadyExists` when the id is taken), version 0;
- read returns the metadata with its version (etcd version - 1); `NotFound` when absent;
- write is a compare-and-swap on that version (`BadVersion` when another writer got there
  first, `NotFound` when the ledger was deleted);
- delete takes an optional expected version;
- listing pages through the keys in bounded range reads, 31-bit ids first, then 63-bit ones,
  so ids come out in increasing order.

`update` is BookKeeper's metadata update loop (read, decide, compare-and-swap, re-read and
decide again on conflict) for the ledger client's close, recovery and ensemble changes.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from metastore import paths
from metastore.errors import BadVersion, NotFound
from metastore.ledger_metadata import LedgerMetadata, decode_ledger_metadata, encode_ledger_metadata
from metastore.versioned_keys import Stored, VersionedKeys

# Every ledger key is `/ledgers/<digits>/...`: digits sort before the upper-case and
# lower-case names of the other children of /ledgers (LAYOUT, available, idgen, ...).
_SCAN_START = paths.LEDGERS + "/0"
_SCAN_END = paths.LEDGERS + "/:"  # the character after "9"
_MAX_UPDATE_ATTEMPTS = 64


@dataclass(frozen=True)
class VersionedLedger:
    """Ledger metadata and the version it was read or written at (Pulsar's, etcd - 1)."""

    metadata: LedgerMetadata
    version: int


class LedgerMetadataStore:
    def __init__(self, keys: VersionedKeys) -> None:
        self.keys = keys

    async def create(self, metadata: LedgerMetadata) -> VersionedLedger:
        """Store a new ledger's metadata; `AlreadyExists` when its id is taken."""
        path = paths.ledger(metadata.ledger_id)
        version = await self.keys.create(path, encode_ledger_metadata(metadata))
        return VersionedLedger(metadata, version)

    async def get(self, ledger_id: int) -> VersionedLedger | None:
        found = await self.keys.read(paths.ledger(ledger_id))
        if found is None:
            return None
        return VersionedLedger(decode_ledger_metadata(ledger_id, found.value), found.version)

    async def read(self, ledger_id: int) -> VersionedLedger:
        """The ledger's metadata; `NotFound` when there is no such ledger."""
        found = await self.get(ledger_id)
        if found is None:
            raise NotFound(paths.ledger(ledger_id))
        return found

    async def write(self, metadata: LedgerMetadata, expected_version: int) -> VersionedLedger:
        """Replace the metadata if it is still at `expected_version`."""
        path = paths.ledger(metadata.ledger_id)
        version = await self.keys.put_at_version(
            path, encode_ledger_metadata(metadata), expected_version
        )
        return VersionedLedger(metadata, version)

    async def update(
        self, ledger_id: int, change: Callable[[LedgerMetadata], LedgerMetadata | None]
    ) -> VersionedLedger:
        """Apply `change` to the current metadata and compare-and-swap the result, re-reading
        and re-applying on conflict. `change` returns None when nothing needs doing any more
        (someone else already did it); the current state is returned then."""
        for attempt in range(_MAX_UPDATE_ATTEMPTS):
            current = await self.read(ledger_id)
            changed = change(current.metadata)
            if changed is None:
                return current
            if changed.ledger_id != ledger_id:
                raise ValueError(f"an update of ledger {ledger_id} cannot change its id")
            try:
                return await self.write(changed, current.version)
            except BadVersion:  # lost to another writer: a short random pause, then again
                await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
        raise BadVersion(paths.ledger(ledger_id))

    async def delete(self, ledger_id: int, expected_version: int | None = None) -> None:
        """Remove the ledger's metadata (only at `expected_version` when given)."""
        await self.keys.delete(paths.ledger(ledger_id), expected_version)

    async def ledger_ids(self, page_size: int = 1000) -> AsyncIterator[int]:
        """Every ledger id, increasing, read `page_size` keys at a time."""
        async for ledger_id, _ in self._scan(page_size, keys_only=True):
            yield ledger_id

    async def ledgers(self, page_size: int = 250) -> AsyncIterator[VersionedLedger]:
        """Every ledger's metadata, by increasing id, `page_size` values at a time (for
        snapshots and the auditor). A value that cannot be decoded raises
        `MetadataFormatError` naming the ledger."""
        async for ledger_id, stored in self._scan(page_size, keys_only=False):
            yield VersionedLedger(decode_ledger_metadata(ledger_id, stored.value), stored.version)

    async def _scan(self, page_size: int, *, keys_only: bool) -> AsyncIterator[tuple[int, Stored]]:
        # Two passes over the same range: 2-4-4 keys, then 3-4-4-4-4 keys; each in
        # numeric order because every level has a fixed width.
        for long_layout in (False, True):
            start = _SCAN_START
            while True:
                page = await self.keys.scan(start, _SCAN_END, limit=page_size, keys_only=keys_only)
                for key, value, version in page.items:
                    ledger_id = paths.ledger_id_of(key)
                    if ledger_id is None:
                        continue
                    if (ledger_id >= paths.SHORT_LEDGER_ID_LIMIT) == long_layout:
                        yield ledger_id, Stored(value, version)
                if not page.more or not page.items:
                    break
                start = page.items[-1][0] + "\0"
