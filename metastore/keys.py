"""The store's key operations, as each store implements them (`etcd_keys.EtcdKeys`,
`zookeeper_keys.ZooKeeperKeys`); `store.MetadataStore` delegates to one of them.

The operations speak of revisions (the store-wide order of writes: etcd's `mod_revision`,
ZooKeeper's `mzxid`), of guarded multi-key commits with change history, of leases (etcd
leases, the ZooKeeper session) and of etcd-style versions (1 after creation, +1 per write;
`metastore.versioned_keys`). How each maps onto its store is in its module's docstring.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Protocol

from metastore.backend import StoreBackend
from metastore.change_history import ChangeLog, ChangeRecord
from metastore.guards import Guard
from metastore.versioned import RangeSnapshot, Versioned, WatchEvent

__all__ = ["StoreKeys", "WatchStream"]


class WatchStream(Protocol):
    """An established watch as `WatchEvent`s, in revision order. The iteration raises
    `Compacted` when the revisions still to be sent are gone, `Unavailable` when the
    connection broke (readers then re-read)."""

    def __aiter__(self) -> AsyncIterator[WatchEvent]: ...

    async def cancel(self) -> None: ...


class StoreKeys(Protocol):
    """`MetadataStore`'s operations on one store (their meaning: `MetadataStore`'s
    docstrings). Every call fails within the store's timeout with `Unavailable` when the
    store cannot be reached."""

    @property
    def backend(self) -> StoreBackend: ...

    @property
    def change_log(self) -> ChangeLog: ...

    # reads
    async def get(self, path: str) -> Versioned | None: ...

    async def read_range(
        self, path: str, *, prefix: bool, watching: bool = True
    ) -> RangeSnapshot: ...

    async def lease_of(self, path: str) -> int | None: ...

    async def watch(self, path: str, *, prefix: bool, start_revision: int) -> WatchStream: ...

    async def watch_keys(self, first: str, end: str, *, start_revision: int) -> WatchStream: ...

    async def revision(self) -> int: ...

    async def compact(self, revision: int) -> None: ...

    # writes
    async def put(self, path: str, value: bytes, expected_revision: int | None) -> int: ...

    async def put_if_revision(
        self,
        path: str,
        value: bytes,
        expected_revision: int,
        *,
        lease: int | None = None,
        requires: str | None = None,
    ) -> tuple[bool, Versioned | None]: ...

    async def delete(self, path: str, expected_revision: int | None) -> int: ...

    async def delete_children(self, path: str) -> int: ...

    async def commit(
        self,
        guards: Sequence[Guard],
        puts: Mapping[str, bytes],
        delete_trees: Sequence[str],
        deletes: Sequence[str],
    ) -> int: ...

    async def swap(
        self,
        path: str,
        guard: Guard,
        value: bytes | None,
        records: Sequence[tuple[str, bytes]] = (),
    ) -> int: ...

    async def put_ephemeral(self, path: str, value: bytes, lease: int) -> None: ...

    async def create_sequential(self, prefix: str, value: bytes, lease: int | None) -> str: ...

    async def take_sequential_number(self, parent: str, name: str, lease: int) -> int: ...

    # leases
    async def grant_lease(self, ttl: int) -> int: ...

    async def refresh_lease(self, lease: int) -> bool: ...

    async def revoke_lease(self, lease: int) -> None: ...

    # etcd-style versions
    async def get_with_version(self, path: str) -> tuple[bytes, int] | None: ...

    async def scan(
        self, start: str, end: str, *, limit: int, keys_only: bool
    ) -> tuple[list[tuple[str, bytes, int]], bool]: ...

    async def put_at_version(
        self, path: str, value: bytes, version: int, *, lease: int | None = None
    ) -> tuple[bool, bool]: ...

    async def put_returning_version(self, path: str, value: bytes) -> int: ...

    async def delete_at_version(self, path: str, version: int | None) -> tuple[bool, bool]: ...

    # change history
    async def read_changes(self, since: int, limit: int, prefix: str) -> list[ChangeRecord]: ...

    async def prune_changes(self, max_records: int, max_age_seconds: float) -> int: ...

