"""Pulsar's metadata paths on etcd or ZooKeeper, behind one class every layer uses.

`MetadataStore` holds what sits above the store seam (group commit, the attached caches,
change history's log) and delegates every key operation to the store's `keys.StoreKeys`:
`etcd_keys.EtcdKeys` (transactions comparing `mod_revision`) or `zookeeper_keys.ZooKeeperKeys`
(znode reads, conditional writes and `multi`s, with the znode's `mzxid` as the revision).
Concurrent writers of one key in one process share a single write (group commit), so CAS
conflicts only come from other processes.

Failures: a call fails within `timeout` seconds with `Unavailable` when the store cannot be
reached. A read, or a write whose request was never sent, has then done nothing. A write
whose etcd call failed after its request may have reached etcd (a timeout, a connection
broken mid-call) is settled within the same `timeout` (the call has 40% of it, finding out
another 40%): when its change record (unique to the write) or, without one, the value it
writes is found, the call answers as the applied write did; when its record is absent while
its compare can no longer hold (the key moved on without it), it fails with `Unavailable`:
not applied, and never will be; otherwise with `OutcomeUnknown` (a 503 whose reason says the
outcome is unknown): it may have been applied, or may still be. Watch-fed caches follow etcd
either way. Writes that nothing can settle (deletes without a change record, writes
returning the version before) are `OutcomeUnknown` at once. On ZooKeeper a write whose call
failed after kazoo took its request off its queue to send it (a connection loss, a timeout)
is settled by the same rule (`metastore.settling`, shared by both stores): its change record
(a `multi` carries the record's create), or else the znode's data and the revision it
requires. Reads answered on the session that sent it (alive, reconnected within the time
allowed) see every write it can ever make, so when they find no trace of it, it was not
applied (`Unavailable`; a delete at a revision without a record: the key is still at it);
when the session was lost meanwhile, a trace found still answers as applied, and otherwise,
or when nothing answers in time, `OutcomeUnknown` (never sent again). A write never sent is
`Unavailable` at once; sequential and ephemeral creates (nothing to find them by) are
`OutcomeUnknown`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from metastore.change_history import ChangeContext, ChangeLog, ChangeRecord, KeyChange
from metastore.codec import load_json
from metastore.etcd_backend import Endpoint, EtcdBackend
from metastore.etcd_keys import EtcdKeys, child_range, to_key
from metastore.group_commit import Draft, GroupCommit
from metastore.guards import Guard
from metastore.keys import StoreKeys, WatchStream
from metastore.retry import retry_on_conflict
from metastore.store_url import EtcdUrl, StoreUrl, parse_store_url
from metastore.versioned import NOT_CACHED, NotCached, RangeSnapshot, Versioned, WatchEvent
from metastore.zookeeper_backend import ZooKeeperBackend
from metastore.zookeeper_keys import ZooKeeperKeys

__all__ = [
    "UNCHANGED",
    "Endpoint",
    "Guard",
    "KeyCache",
    "MetadataStore",
    "Mutation",
    "RangeSnapshot",
    "Unchanged",
    "Versioned",
    "WatchEvent",
    "WatchStream",
    "child_range",
    "open_metadata_store",
    "parse_metadata_store_url",
    "retry_on_conflict",
    "to_key",
]

log = logging.getLogger(__name__)


def parse_metadata_store_url(url: str) -> list[Endpoint]:
    """The etcd endpoints of Pulsar's `etcd:http://h1:p1,h2:p2` form (the `etcd:` prefix is
    optional before `http://`); `ValueError` for any other store (`open_metadata_store`
    opens every form)."""
    text = url.strip()
    parsed = parse_store_url(text if text.startswith(("etcd:", "http", "zk:")) else f"etcd:{text}")
    if not isinstance(parsed, EtcdUrl):
        raise ValueError(f"not an etcd metadata store URL: {url!r}")
    return list(parsed.endpoints)


def open_metadata_store(
    url: str | StoreUrl,
    timeout: float = 5.0,
    pipeline_depth: int = 1,
    *,
    session_timeout: float = 30.0,
) -> MetadataStore:
    """The store a `metadataStoreUrl` names (`metastore.store_url`): etcd, or ZooKeeper
    under its chroot. `ValueError` when the URL is malformed."""
    parsed = parse_store_url(url) if isinstance(url, str) else url
    if isinstance(parsed, EtcdUrl):
        return MetadataStore(list(parsed.endpoints), timeout, pipeline_depth)
    backend = ZooKeeperBackend(parsed.hosts, parsed.chroot, timeout=timeout,
                               session_timeout=session_timeout)
    return MetadataStore([], timeout, pipeline_depth, zookeeper=backend)


class Unchanged:
    """Returned by an update function to leave the key as it is."""


UNCHANGED = Unchanged()
Mutation = Callable[[bytes | None], "bytes | Unchanged | None"]


class KeyCache(Protocol):
    """What the store needs of a cache (see `metastore.cache.WatchedRange`)."""

    def peek(self, path: str) -> Versioned | NotCached | None:
        """The cached state of `path` (None: known absent), or `NOT_CACHED`."""

    def observe(self, path: str, value: bytes | None, revision: int) -> None:
        """Record a write this process made."""


class MetadataStore:
    """Pulsar's metadata paths on one store. The store's client is private: every operation
    a layer needs is a method here. Implements `group_commit.KeyStore` for its group-commit
    writers."""

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        timeout: float = 5.0,
        pipeline_depth: int = 1,
        *,
        zookeeper: ZooKeeperBackend | None = None,
    ) -> None:
        """`pipeline_depth`: transactions of one key in flight at once (`group_commit`; on
        ZooKeeper, one at a time gathers more updates per `multi` at less CPU per update than
        two: BENCHMARKS.md, "Admin API on ZooKeeper"). With `zookeeper`, the
        store is that ZooKeeper (`endpoints` unused): see `metastore.zookeeper_keys` for
        how its operations map onto it."""
        if not endpoints and zookeeper is None:
            raise ValueError("at least one etcd endpoint is required")
        self.change_log = ChangeLog()
        self.backend: EtcdBackend | ZooKeeperBackend
        self._keys: StoreKeys
        if zookeeper is None:
            self.backend = EtcdBackend(endpoints, timeout)
            self._keys = EtcdKeys(self.backend, self.change_log)
        else:
            self.backend = zookeeper
            self._keys = ZooKeeperKeys(zookeeper, self.change_log)
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self._caches: list[KeyCache] = []
        self._group_commit = GroupCommit(self, pipeline_depth)

    @property
    def pipeline_depth(self) -> int:
        return self._group_commit.pipeline_depth

    async def close(self) -> None:
        await self.backend.close()

    # -- reads ------------------------------------------------------------------------------

    async def get(self, path: str) -> Versioned | None:
        return await self._keys.get(path)

    async def get_json(self, path: str) -> Any | None:
        found = await self.get(path)
        return None if found is None else load_json(found.value)

    async def exists(self, path: str) -> bool:
        return await self.get(path) is not None

    async def read_range(self, path: str, *, prefix: bool) -> RangeSnapshot:
        """The key `path` (`prefix=False`) or every key under `path + "/"`, with the store
        revision of the read (a watch from `revision + 1` misses nothing)."""
        return await self._keys.read_range(path, prefix=prefix)

    async def get_children_values(self, path: str) -> dict[str, Versioned]:
        """Every key under `path + "/"`, by full path."""
        return (await self._keys.read_range(path, prefix=True, watching=False)).entries

    async def children(self, path: str) -> list[str]:
        """Names of the direct children of `path`, sorted (as Pulsar's etcd store lists them)."""
        return await self._keys.backend.children(path)

    async def lease_of(self, path: str) -> int | None:
        """The lease the key is attached to (None: absent or not on a lease)."""
        return await self._keys.lease_of(path)

    async def watch(self, path: str, *, prefix: bool, start_revision: int) -> WatchStream:
        """Changes of the key (or of every key under `path + "/"`) from `start_revision` on;
        the watch is established when this returns. Iterate it until it breaks (the
        iteration then ends or raises); `cancel()` it when done."""
        return await self._keys.watch(path, prefix=prefix, start_revision=start_revision)

    async def watch_keys(self, first: str, end: str, *, start_revision: int) -> WatchStream:
        """Changes of every key in [`first`, `end`) (paths compared as UTF-8 bytes) from
        `start_revision` on, as `watch`. Raises `Compacted` when the store no longer holds
        `start_revision` (at once, or on the first iteration)."""
        return await self._keys.watch_keys(first, end, start_revision=start_revision)

    async def revision(self) -> int:
        """The store's current revision (that of its latest write)."""
        return await self._keys.revision()

    async def compact(self, revision: int) -> None:
        """Discard the history before `revision` (etcd's compaction; nothing on ZooKeeper);
        watches from an older revision then fail with `Compacted`."""
        await self._keys.compact(revision)

    # -- writes -----------------------------------------------------------------------------

    async def put(self, path: str, value: bytes, expected_revision: int | None = None) -> int:
        """Write `value`; with `expected_revision`, only if the key is still at that revision
        (0 means: only if the key does not exist). Returns the new revision. The attached
        caches hold the write at once (this process reads its own writes)."""
        revision = await self._keys.put(path, value, expected_revision)
        self.write_through(path, value, revision)
        return revision

    async def create(self, path: str, value: bytes) -> int:
        return await self.put(path, value, expected_revision=0)

    async def put_if_revision(
        self,
        path: str,
        value: bytes,
        expected_revision: int,
        *,
        lease: int | None = None,
        requires: str | None = None,
    ) -> tuple[bool, Versioned | None]:
        """Write `value` (on `lease`, if given) if the key is still at `expected_revision`
        (0: absent) and the key `requires` (if given) exists. Returns (True, what was written)
        or (False, what the key holds now; None when absent); `NotFound(requires)` when that
        key is gone."""
        done, now = await self._keys.put_if_revision(
            path, value, expected_revision, lease=lease, requires=requires
        )
        if done and now is not None:
            self.write_through(path, now.value, now.revision)
        return done, now

    async def delete(self, path: str, expected_revision: int | None = None) -> int:
        """Delete the key and return the revision of the deletion; `NotFound` when it is
        absent, `BadVersion` when it changed since `expected_revision`."""
        revision = await self._keys.delete(path, expected_revision)
        self.write_through(path, None, revision)
        return revision

    async def delete_tree(self, path: str) -> int:
        """Delete `path` and everything under it, atomically; the revision after it."""
        return await self.commit([], delete_trees=[path])

    async def delete_children(self, path: str) -> int:
        """Delete every key under `path + "/"` (not `path` itself); the revision after it."""
        return await self._keys.delete_children(path)

    async def commit(
        self,
        guards: Sequence[Guard],
        puts: Mapping[str, bytes] | None = None,
        delete_trees: Sequence[str] = (),
        deletes: Sequence[str] = (),
    ) -> int:
        """One atomic write over several keys: when every guard holds, write `puts`, delete
        each of `deletes` and each of `delete_trees` (the key and everything under it), and
        return the store revision after it; otherwise nothing is written and `BadVersion`
        is raised. The attached caches hold the written keys, and the deleted keys and tree
        roots as gone, at once."""
        puts = puts or {}
        revision = await self._keys.commit(guards, puts, delete_trees, deletes)
        for path, value in puts.items():
            self.write_through(path, value, revision)
        for path in [*deletes, *delete_trees]:
            self.write_through(path, None, revision)
        return revision

    async def swap(
        self,
        path: str,
        guard: Guard,
        value: bytes | None,
        records: Sequence[tuple[str, bytes]] = (),
    ) -> int:
        """Write `value` (None: delete) if `guard` holds; the new revision, else `BadVersion`
        (group commit's write). `records`: the change record of each update of the batch,
        written in the same write (the guard makes their `before` exact)."""
        return await self._keys.swap(path, guard, value, records)

    async def put_ephemeral(self, path: str, value: bytes, lease_id: int) -> None:
        """Write a key attached to a lease: it vanishes when the lease expires."""
        await self._keys.put_ephemeral(path, value, lease_id)

    async def create_sequential(self, prefix: str, value: bytes, lease: int | None) -> str:
        """Create `prefix` + a ten-digit sequence number (ephemeral on `lease` when given),
        as each store numbers sequential keys (`backend.StoreBackend.create_sequential`);
        the path created."""
        return await self._keys.create_sequential(prefix, value, lease)

    async def take_sequential_number(self, parent: str, name: str, lease: int) -> int:
        """A number no other call on this store gets, as Pulsar's ledger-id generator takes
        one on each store: an ephemeral-sequential key `parent/<name><n>` is created on
        `lease` and deleted; `n`."""
        return await self._keys.take_sequential_number(parent, name, lease)

    async def grant_lease(self, ttl: int) -> int:
        return await self._keys.grant_lease(ttl)

    async def refresh_lease(self, lease_id: int) -> bool:
        """Keep the lease alive; False when it has already expired."""
        return await self._keys.refresh_lease(lease_id)

    async def revoke_lease(self, lease_id: int) -> None:
        """End the lease now: every key on it is deleted. A lease that already expired is
        ended too (no error)."""
        await self._keys.revoke_lease(lease_id)

    # -- etcd versions (Pulsar's metadata-store versions: `metastore.versioned_keys`) --------

    async def get_with_version(self, path: str) -> tuple[bytes, int] | None:
        """The value and its etcd `version` (1 after creation, +1 per write), or None."""
        return await self._keys.get_with_version(path)

    async def scan(
        self, start: str, end: str, *, limit: int, keys_only: bool = False
    ) -> tuple[list[tuple[str, bytes, int]], bool]:
        """Up to `limit` keys in [start, end) in key order, as (path, value, etcd version),
        in one bounded range request, and whether more keys follow."""
        return await self._keys.scan(start, end, limit=limit, keys_only=keys_only)

    async def put_at_version(
        self, path: str, value: bytes, version: int, *, lease: int | None = None
    ) -> tuple[bool, bool]:
        """Write `value` (on `lease`, if given) only if the key's etcd version is `version`
        (0: absent). Returns (written, whether the key exists when not written)."""
        return await self._keys.put_at_version(path, value, version, lease=lease)

    async def put_returning_version(self, path: str, value: bytes) -> int:
        """An unconditional write; the etcd version the key had before it (0: absent)."""
        return await self._keys.put_returning_version(path, value)

    async def delete_at_version(self, path: str, version: int | None) -> tuple[bool, bool]:
        """Delete the key if it exists and, when `version` is given, is at that etcd version.
        Returns (deleted, whether the key exists when not deleted)."""
        return await self._keys.delete_at_version(path, version)

    # -- change history (metastore.change_history) -----------------------------------------

    def change_record(self, context: ChangeContext, change: KeyChange) -> tuple[str, bytes]:
        """Group commit's record of one update."""
        return self.change_log.record(context, [change])

    async def read_changes(
        self, since: int = 0, limit: int = 1000, prefix: str = ""
    ) -> list[ChangeRecord]:
        """Up to `limit` change records of transactions after revision `since`, touching
        `prefix` (see `ChangeRecord.touches`), ordered by revision and, within one
        transaction, as written. A transaction's records are never split between pages
        (unless one transaction alone holds more than `limit`)."""
        return await self._keys.read_changes(since, limit, prefix)

    async def prune_changes(self, max_records: int, max_age_seconds: float) -> int:
        """Delete the oldest change records beyond `max_records` (<= 0: no limit) and those
        older than `max_age_seconds` (<= 0: no limit); how many were deleted."""
        return await self._keys.prune_changes(max_records, max_age_seconds)

    # -- read-modify-write --------------------------------------------------------------------

    def attach_cache(self, cache: KeyCache) -> None:
        """Let updates start from `cache` (saving a read) and write through to it."""
        self._caches.append(cache)

    def cached(self, path: str) -> Versioned | NotCached | None:
        """What an attached cache holds of `path` (None: known absent), or `NOT_CACHED`."""
        for cache in self._caches:
            known = cache.peek(path)
            if not isinstance(known, NotCached):
                return known
        return NOT_CACHED

    def write_through(self, path: str, value: bytes | None, revision: int) -> None:
        """Tell the attached caches about a write this process made (None: a delete)."""
        for cache in self._caches:
            cache.observe(path, value, revision)

    async def update(self, path: str, mutate: Mutation) -> Versioned | None:
        """Compare-and-swap: `mutate(current)` returns the new value, None to delete the key,
        or UNCHANGED. An exception from `mutate` fails this caller only, writing nothing of
        its change. Returns the key's state after the write (None when it does not exist).

        Concurrent updates of one key in this process are coalesced: one leader applies
        every pending mutation in order and writes once (group commit), so N writers cost
        one transaction, not N. Other processes are kept out by the CAS."""

        def apply(draft: Draft) -> None:
            result = mutate(draft.raw())
            if not isinstance(result, Unchanged):
                draft.set_raw(result)

        return await self._group_commit.submit(path, apply)

    async def update_json(
        self,
        path: str,
        mutate: Callable[[Any], Any],
        finalize: Callable[[Any], Any] | None = None,
    ) -> Versioned | None:
        """`update` on the parsed JSON document: `mutate(doc)` returns the new document (it
        may change `doc` in place, but only after its last check that can raise), None to
        delete, or UNCHANGED. A batch of JSON updates parses and serialises once;
        `finalize(doc)` runs once before serialising (e.g. to sort keys). A new document that
        cannot be encoded fails its own update with `InvalidValue`, not the batch."""

        def apply(draft: Draft) -> None:
            result = mutate(draft.doc())
            if not isinstance(result, Unchanged):
                draft.set_doc(result, finalize)

        return await self._group_commit.submit(path, apply)
