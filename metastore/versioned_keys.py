"""Keys with Pulsar's metadata-store versions on etcd, for the binary records BookKeeper and
the managed ledger keep (ledger metadata, ManagedLedgerInfo, cursors, ledger-id counters).

Pulsar's `EtcdMetadataStore` exposes a key's version as etcd's `version - 1` (0 right after
creation, +1 per write) and builds every conditional write as one etcd transaction:

- create-if-absent (Pulsar's expected version -1): compare `version == 0`;
- compare-and-swap at version v: compare `version == v + 1`;
- delete at version v: the same compare; a delete of a missing key is `NotFound`;
- ephemeral: the put carries a lease;
- a plain put returns the previous value's etcd version, i.e. the Pulsar version of the new
  value (what its sequential keys are numbered with).

`VersionedKeys` keeps those meanings exactly, so a Pulsar broker or BookKeeper tool sharing
the etcd sees the versions it expects. It is a view over a `MetadataStore` (whose etcd
connection, timeout, endpoint failover and error mapping it uses): it only translates
versions and failures. `VersionedKeys(store)` shares the store; `VersionedKeys(endpoints)`
opens a store of its own, closed by `close()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from metastore.errors import AlreadyExists, BadVersion, NotFound
from metastore.store import Endpoint, MetadataStore, open_metadata_store


@dataclass(frozen=True)
class Stored:
    """A value and its Pulsar version (etcd version - 1)."""

    value: bytes
    version: int


@dataclass(frozen=True)
class Page:
    """One page of a key scan: (key, value, Pulsar version) in key order (values empty when
    the scan was keys-only), and whether more keys follow in the range."""

    items: list[tuple[str, bytes, int]]
    more: bool


class VersionedKeys:
    def __init__(
        self, store: MetadataStore | Sequence[Endpoint] | str, timeout: float = 5.0
    ) -> None:
        """A view over `store`, or over a store of its own on etcd `endpoints` or at a
        `metadataStoreUrl` (closed by `close()`)."""
        self._owned = not isinstance(store, MetadataStore)
        if isinstance(store, str):
            self.store = open_metadata_store(store, timeout)
        else:
            self.store = store if isinstance(store, MetadataStore) else MetadataStore(
                store, timeout)

    @classmethod
    def of(cls, store: MetadataStore) -> VersionedKeys:
        """The view over `store` (sharing its connection)."""
        return cls(store)

    @property
    def timeout(self) -> float:
        return self.store.timeout

    async def close(self) -> None:
        """Close the store if this view opened it (a shared store is its owner's to close)."""
        if self._owned:
            await self.store.close()

    # -- reads ------------------------------------------------------------------------------

    async def read(self, path: str) -> Stored | None:
        found = await self.store.get_with_version(path)
        return None if found is None else Stored(found[0], found[1] - 1)

    async def exists(self, path: str) -> bool:
        return await self.store.exists(path)

    async def children(self, path: str) -> list[str]:
        """Names of the direct children of `path`, sorted, as Pulsar's etcd store lists them
        (keys under `path + "/"`; the parent key need not exist)."""
        return await self.store.children(path)

    async def scan(self, start: str, end: str, *, limit: int, keys_only: bool = False) -> Page:
        """Up to `limit` keys in [start, end), in key order (one bounded range request)."""
        items, more = await self.store.scan(start, end, limit=limit, keys_only=keys_only)
        return Page([(key, value, version - 1) for key, value, version in items], more)

    # -- writes -----------------------------------------------------------------------------

    async def create_sequential(self, prefix: str, value: bytes, lease: int | None) -> str:
        """`MetadataStore.create_sequential`: the path created."""
        return await self.store.create_sequential(prefix, value, lease)

    async def create(self, path: str, value: bytes, lease: int | None = None) -> int:
        """Write `value` only if the key does not exist (`AlreadyExists` otherwise), on
        `lease` when given (an ephemeral key); version 0."""
        written, _ = await self.store.put_at_version(path, value, 0, lease=lease)
        if not written:
            raise AlreadyExists(path)
        return 0

    async def put_at_version(self, path: str, value: bytes, expected: int) -> int:
        """Compare-and-swap: write `value` only if the key is at Pulsar version `expected`;
        `NotFound` when the key is gone, `BadVersion` when it moved on. The new version."""
        written, exists = await self.store.put_at_version(path, value, expected + 1)
        if not written:
            raise BadVersion(path) if exists else NotFound(path)
        return expected + 1

    async def put(self, path: str, value: bytes) -> int:
        """An unconditional write; the Pulsar version of the value written."""
        return await self.store.put_returning_version(path, value)

    async def delete(self, path: str, expected: int | None = None) -> None:
        """Delete the key, only at Pulsar version `expected` when given; `NotFound` when it is
        absent, `BadVersion` when it moved on."""
        version = None if expected is None else expected + 1
        deleted, exists = await self.store.delete_at_version(path, version)
        if not deleted:
            raise BadVersion(path) if exists else NotFound(path)

    async def delete_tree(self, path: str) -> None:
        """Delete `path` and every key under `path + "/"` in one transaction."""
        await self.store.delete_tree(path)

    # -- leases -----------------------------------------------------------------------------

    async def grant_lease(self, ttl: int) -> int:
        return await self.store.grant_lease(ttl)

    async def refresh_lease(self, lease_id: int) -> bool:
        """Keep the lease alive; False when it has already expired."""
        return await self.store.refresh_lease(lease_id)

    async def revoke_lease(self, lease_id: int) -> None:
        await self.store.revoke_lease(lease_id)
