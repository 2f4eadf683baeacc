"""Pulsar's metadata paths on etcd or ZooKeeper, behind one class every layer uses.

On etcd (`etcd_backend.EtcdBackend`'s connection), every read-modify-write is a transaction
that compares the key's `mod_revision` and retries on conflict. Concurrent writers of one key
in one process share a single transaction (group commit), so CAS conflicts only come from
other processes. On ZooKeeper (`zookeeper_keys.ZooKeeperKeys` over
`zookeeper_backend.ZooKeeperBackend`) the same operations are znode reads, conditional writes
and `multi`s, with the znode's `mzxid` as the revision. Every call fails within `timeout`
seconds with `Unavailable` when the store cannot be reached; a failed call writes nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import aetcd
from aetcd import rpc

from metastore import paths
from metastore.change_history import (
    ChangeContext,
    ChangeLog,
    ChangeRecord,
    KeyChange,
    current_change,
    whole_transactions,
)
from metastore.codec import load_json
from metastore.errors import (
    AlreadyExists,
    BadVersion,
    Compacted,
    MetastoreError,
    NotFound,
    Unavailable,
)
from metastore.etcd_backend import Endpoint, EtcdBackend
from metastore.group_commit import Draft, GroupCommit
from metastore.guards import Guard, GuardKind
from metastore.retry import MAX_CAS_ATTEMPTS, conflict_backoff, retry_on_conflict
from metastore.store_url import EtcdUrl, StoreUrl, parse_store_url
from metastore.versioned import NOT_CACHED, NotCached, RangeSnapshot, Versioned, WatchEvent
from metastore.zookeeper_backend import ZooKeeperBackend
from metastore.zookeeper_keys import ZooKeeperKeys, ZooKeeperWatch

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

PRUNE_BATCH = 100  # deletes per transaction (etcd's --max-txn-ops defaults to 128)

T = TypeVar("T")

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


def _unsupported(what: str) -> MetastoreError:
    return MetastoreError(f"{what} are not supported on ZooKeeper")


def to_key(path: str) -> bytes:
    return path.encode()


def child_range(path: str) -> tuple[bytes, bytes]:
    """The etcd key range of everything under `path + "/"`."""
    prefix = (path.rstrip("/") + "/").encode()
    return prefix, prefix[:-1] + bytes([prefix[-1] + 1])


class WatchStream:
    """An established etcd watch as `WatchEvent`s (hides the client's event types), in
    revision order, the events of one revision together. The iteration raises `Compacted`
    when etcd compacted the revisions still to be sent, `Unavailable` when the connection
    broke."""

    def __init__(self, watch: Any) -> None:
        self._watch = watch

    async def __aiter__(self) -> AsyncIterator[WatchEvent]:
        try:
            async for event in self._watch:
                kv = event.kv
                deleted = event.kind == aetcd.EventKind.DELETE
                revision = kv.mod_revision
                yield WatchEvent(kv.key.decode(), None if deleted else kv.value, revision)
        except aetcd.RevisionCompactedError as exc:
            raise Compacted(int(exc.compacted_revision)) from None
        except aetcd.ClientError as exc:
            raise Unavailable(f"watch broken: {type(exc).__name__}") from exc

    async def cancel(self) -> None:
        with contextlib.suppress(Exception):
            await self._watch.cancel()


class ZooKeeperWatchStream(WatchStream):
    """A `WatchStream` over ZooKeeper's change stream (`zookeeper_keys.ZooKeeperWatch`)."""

    def __init__(self, watch: ZooKeeperWatch) -> None:
        super().__init__(watch)
        self._zookeeper = watch

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self._zookeeper.__aiter__()

    async def cancel(self) -> None:
        await self._zookeeper.cancel()


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
    """etcd at Pulsar's paths. The etcd client is private: every operation a layer needs is
    a method here. Implements `group_commit.KeyStore` for its group-commit writers."""

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        timeout: float = 5.0,
        pipeline_depth: int = 1,
        *,
        zookeeper: ZooKeeperBackend | None = None,
    ) -> None:
        """`pipeline_depth`: transactions of one key in flight at once (`group_commit`).
        With `zookeeper`, the store is that ZooKeeper (`endpoints` unused): see
        `metastore.zookeeper_keys` for how its operations map onto it."""
        self.change_log = ChangeLog()
        self._zk = None if zookeeper is None else ZooKeeperKeys(zookeeper, self.change_log)
        if not endpoints and zookeeper is None:
            raise ValueError("at least one etcd endpoint is required")
        self.backend: EtcdBackend | ZooKeeperBackend = (
            zookeeper if zookeeper is not None else EtcdBackend(endpoints, timeout))
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self._caches: list[KeyCache] = []
        self._group_commit = GroupCommit(self, pipeline_depth)

    @property
    def pipeline_depth(self) -> int:
        return self._group_commit.pipeline_depth

    # -- connection -------------------------------------------------------------------------

    @property
    def etcd(self) -> EtcdBackend:
        """The etcd backend (`MetastoreError` on ZooKeeper)."""
        if not isinstance(self.backend, EtcdBackend):
            raise _unsupported("etcd transactions")
        return self.backend

    @property
    def on_zookeeper(self) -> bool:
        return self._zk is not None

    def _client(self) -> aetcd.Client:
        return self.etcd.client()

    async def close(self) -> None:
        await self.backend.close()

    async def _call(self, make: Callable[[aetcd.Client], Awaitable[T]]) -> T:
        """Run one etcd call within the timeout (`EtcdBackend.call`)."""
        return await self.etcd.call(make)

    async def _transaction(
        self, compare: list[Any], success: list[Any], failure: list[Any] | None = None
    ) -> tuple[bool, list[Any]]:
        ok, responses = await self._call(
            lambda c: c.transaction(compare=compare, success=success, failure=failure or [])
        )
        return bool(ok), list(responses)

    async def _recorded_transaction(
        self,
        compare: list[Any],
        success: list[Any],
        failure: list[Any] | None = None,
        *,
        writes: Mapping[str, bytes | None],
        trees: Sequence[str] = (),
    ) -> tuple[bool, list[Any]]:
        """`_transaction` that, when a change context is current, adds the change record to
        the same transaction. `writes`: the keys the transaction puts (their new value) or
        deletes (None); `trees`: roots it deletes with everything under them. The values
        before are read first and guarded, so the record holds exactly what the transaction
        replaced; when only that guard fails (a concurrent writer), it reads and tries again,
        when the caller's own conditions fail, it answers as `_transaction` does."""
        context = current_change()
        writes = {path: v for path, v in writes.items() if paths.in_change_history(path)}
        trees = [path for path in trees if paths.in_change_history(path + "/")]
        if context is None or not (writes or trees):
            return await self._transaction(compare, success, failure)
        for attempt in range(MAX_CAS_ATTEMPTS):
            changes, guards = await self._before(writes, trees)
            key, value = self.change_log.record(context, changes)
            tx = self._client().transactions
            ok, responses = await self._transaction(
                compare + guards, [*success, tx.put(to_key(key), value)], failure
            )
            if ok:
                return ok, responses
            ok, responses = await self._transaction(compare, [], failure)
            if not ok:
                return ok, responses
            await conflict_backoff(attempt)
        raise BadVersion(", ".join([*writes, *trees]))

    async def _before(
        self, writes: Mapping[str, bytes | None], trees: Sequence[str]
    ) -> tuple[list[KeyChange], list[Any]]:
        """The changes `writes` and `trees` make to what etcd holds now, and the compares that
        hold while it still holds that."""
        tx = self._client().transactions
        reads = [tx.get(to_key(path)) for path in writes]
        for path in trees:
            start, end = child_range(path)
            reads.append(tx.get(start, range_end=end))
        _, responses = await self._transaction([], reads)
        changes: list[KeyChange] = []
        guards: list[Any] = []
        for (path, after), found in zip(writes.items(), responses, strict=False):
            revision = int(found[0][1].mod_revision) if found else 0
            guards.append(tx.mod(to_key(path)) == revision)
            changes.append(KeyChange(path, found[0][0] if found else None, after))
        for path, children in zip(trees, responses[len(writes) :], strict=True):
            top = 0  # every child is at most this old; a key written since is newer
            for value, meta in children:
                changes.append(KeyChange(meta.key.decode(), value, None))
                top = max(top, int(meta.mod_revision))
            start, end = child_range(path)
            guards.append(tx.mod(start, range_end=end) < top + 1)
        return changes, guards

    def _compare(self, guard: Guard) -> Any:
        tx = self._client().transactions
        key = to_key(guard.path)
        if guard.kind is GuardKind.TREE:
            start, end = child_range(guard.path)
            return tx.mod(start, range_end=end) < guard.revision + 1
        if guard.kind is GuardKind.VALUE:
            return tx.version(key) == 0 if guard.value is None else tx.value(key) == guard.value
        return tx.mod(key) == guard.revision

    # -- reads ------------------------------------------------------------------------------

    async def get(self, path: str) -> Versioned | None:
        if self._zk is not None:
            return await self._zk.get(path)
        result = await self._call(lambda c: c.get(to_key(path)))
        if result is None:
            return None
        return Versioned(result.value, result.mod_revision)

    async def get_json(self, path: str) -> Any | None:
        found = await self.get(path)
        return None if found is None else load_json(found.value)

    async def exists(self, path: str) -> bool:
        return await self.get(path) is not None

    async def read_range(self, path: str, *, prefix: bool) -> RangeSnapshot:
        """The key `path` (`prefix=False`) or every key under `path + "/"`, with the store
        revision of the read (a watch from `revision + 1` misses nothing)."""
        if self._zk is not None:
            return await self._zk.read_range(path, prefix=prefix)
        if prefix:
            start, _ = child_range(path)
            result = await self._call(lambda c: c.get_prefix(start))
            entries = {kv.key.decode(): Versioned(kv.value, kv.mod_revision) for kv in result}
        else:
            key = to_key(path)
            result = await self._call(lambda c: c.get_prefix(key))
            entries = {
                kv.key.decode(): Versioned(kv.value, kv.mod_revision)
                for kv in result
                if kv.key == key
            }
        return RangeSnapshot(entries, int(result.header.revision))

    async def get_children_values(self, path: str) -> dict[str, Versioned]:
        """Every key under `path + "/"`, by full path."""
        if self._zk is not None:
            return (await self._zk.read_range(path, prefix=True, watching=False)).entries
        return (await self.read_range(path, prefix=True)).entries

    async def children(self, path: str) -> list[str]:
        """Names of the direct children of `path`, sorted (as Pulsar's etcd store lists them)."""
        if self._zk is not None:
            return await self._zk.backend.children(path)
        start, _ = child_range(path)
        result = await self._call(lambda c: c.get_prefix(start, keys_only=True))
        cut = len(start)
        return sorted({kv.key[cut:].decode().split("/", 1)[0] for kv in result})

    async def lease_of(self, path: str) -> int | None:
        """The lease the key is attached to (None: absent or not on a lease)."""
        if self._zk is not None:
            return await self._zk.lease_of(path)
        result = await self._call(lambda c: c.get(to_key(path)))
        return int(result.lease) if result is not None and result.lease else None

    async def watch(self, path: str, *, prefix: bool, start_revision: int) -> WatchStream:
        """Changes of the key (or of every key under `path + "/"`) from `start_revision` on;
        the watch is established when this returns. Iterate it until it breaks (the
        iteration then ends or raises); `cancel()` it when done."""
        if self._zk is not None:
            return ZooKeeperWatchStream(await self._zk.watch(path, prefix=prefix))
        if prefix:
            key, range_end = child_range(path)
        else:
            key, range_end = to_key(path), None
        return await self._watch(key, range_end, start_revision)

    async def watch_keys(self, first: str, end: str, *, start_revision: int) -> WatchStream:
        """Changes of every key in [`first`, `end`) (paths compared as UTF-8 bytes) from
        `start_revision` on, as `watch`. Raises `Compacted` when etcd compacted
        `start_revision` away (at once, or on the first iteration)."""
        if self._zk is not None:
            return ZooKeeperWatchStream(
                await self._zk.watch_keys(first, end, start_revision=start_revision)
            )
        return await self._watch(to_key(first), to_key(end), start_revision)

    async def _watch(self, key: bytes, range_end: bytes | None, start_revision: int) -> WatchStream:
        try:
            watch = await self._call(
                lambda c: c.watch(key, range_end=range_end, start_revision=start_revision)
            )
        except aetcd.RevisionCompactedError as exc:
            raise Compacted(int(exc.compacted_revision)) from None
        except aetcd.WatchTimeoutError as exc:
            raise Unavailable("metadata store unavailable: the watch was not created") from exc
        return WatchStream(watch)

    async def revision(self) -> int:
        """The store's current revision (that of its latest write)."""
        if self._zk is not None:
            return await self._zk.revision()
        result = await self._call(lambda c: c.get_prefix(b"\0", keys_only=True))
        return int(result.header.revision)

    async def compact(self, revision: int) -> None:
        """Discard the history before `revision` (etcd's compaction); watches from an older
        revision then fail with `Compacted`."""
        if self._zk is not None:
            return
        await self._call(lambda c: c.compact(revision, physical=True))

    # -- writes -----------------------------------------------------------------------------

    async def put(self, path: str, value: bytes, expected_revision: int | None = None) -> int:
        """Write `value`; with `expected_revision`, only if the key is still at that revision
        (0 means: only if the key does not exist). Returns the new revision."""
        if self._zk is not None:
            return await self._zk.put(path, value, expected_revision)
        if expected_revision is None:
            if current_change() is None:
                result = await self._call(lambda c: c.put(to_key(path), value))
                return int(result.header.revision)
            tx = self._client().transactions
            _, responses = await self._recorded_transaction(
                [], [tx.put(to_key(path), value)], writes={path: value}
            )
            return int(responses[0].response_put.header.revision)
        try:
            return await self.commit([Guard(path, expected_revision)], {path: value})
        except BadVersion:
            raise AlreadyExists(path) if expected_revision == 0 else BadVersion(path) from None

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
        or (False, what the key holds now, read in the same transaction; None when absent);
        `NotFound(requires)` when that key is gone."""
        if self._zk is not None:
            return await self._zk.put_if_revision(
                path, value, expected_revision, lease=lease, requires=requires
            )
        tx = self._client().transactions
        key = to_key(path)
        compare = [tx.mod(key) == expected_revision]
        failure = [tx.get(key)]
        if requires is not None:
            compare.append(tx.version(to_key(requires)) > 0)
            failure.append(tx.get(to_key(requires)))
        ok, responses = await self._recorded_transaction(
            compare, [tx.put(key, value, lease=lease)], failure, writes={path: value}
        )
        if ok:
            return True, Versioned(value, int(responses[0].response_put.header.revision))
        if requires is not None and not responses[1]:
            raise NotFound(requires)
        found = responses[0]  # a range response: [(value, metadata)] for the key, if present
        if not found:
            return False, None
        current, meta = found[0]
        return False, Versioned(current, int(meta.mod_revision))

    async def delete(self, path: str, expected_revision: int | None = None) -> int:
        """Delete the key and return the revision of the deletion; `NotFound` when it is
        absent, `BadVersion` when it changed since `expected_revision`."""
        if self._zk is not None:
            return await self._zk.delete(path, expected_revision)
        key = to_key(path)
        tx = self._client().transactions
        compare = [tx.version(key) > 0]
        if expected_revision is not None:
            compare.append(tx.mod(key) == expected_revision)
        ok, responses = await self._recorded_transaction(
            compare, [tx.delete(key)], writes={path: None}
        )
        if not ok:
            if expected_revision is not None and await self.exists(path):
                raise BadVersion(path)
            raise NotFound(path)
        return int(responses[0].response_delete_range.header.revision)

    async def delete_tree(self, path: str) -> int:
        """Delete `path` and everything under it, atomically; the revision after it."""
        return await self.commit([], delete_trees=[path])

    async def delete_children(self, path: str) -> int:
        """Delete every key under `path + "/"` (not `path` itself); the revision after it."""
        if self._zk is not None:
            return await self._zk.delete_children(path)
        start, end = child_range(path)
        tx = self._client().transactions
        _, responses = await self._recorded_transaction(
            [], [tx.delete(start, range_end=end)], writes={}, trees=[path]
        )
        return int(responses[0].response_delete_range.header.revision)

    async def commit(
        self,
        guards: Sequence[Guard],
        puts: Mapping[str, bytes] | None = None,
        delete_trees: Sequence[str] = (),
        deletes: Sequence[str] = (),
    ) -> int:
        """One etcd transaction over several keys: when every guard holds, write `puts`,
        delete each of `deletes` and each of `delete_trees` (the key and everything under
        it), and return the store revision after it; otherwise nothing is written and
        `BadVersion` is raised."""
        if self._zk is not None:
            return await self._zk.commit(guards, puts or {}, delete_trees, deletes)
        tx = self._client().transactions
        compare = [self._compare(guard) for guard in guards]
        success = [tx.put(to_key(path), value) for path, value in (puts or {}).items()]
        success += [tx.delete(to_key(path)) for path in deletes]
        for path in delete_trees:
            start, end = child_range(path)
            success += [tx.delete(to_key(path)), tx.delete(start, range_end=end)]
        writes: dict[str, bytes | None] = dict(puts or {})
        writes.update((path, None) for path in [*deletes, *delete_trees])
        ok, responses = await self._recorded_transaction(
            compare, success, writes=writes, trees=delete_trees
        )
        if not ok:
            raise BadVersion(", ".join(guard.path for guard in guards))
        if not responses:
            return 0
        first = responses[0]
        kind = first.WhichOneof("response")
        return int(getattr(first, kind).header.revision)

    async def swap(
        self,
        path: str,
        guard: Guard,
        value: bytes | None,
        records: Sequence[tuple[str, bytes]] = (),
    ) -> int:
        """Write `value` (None: delete) if `guard` holds; the new revision, else `BadVersion`
        (group commit's write). `records`: the change record of each update of the batch,
        written in the same transaction (the guard makes their `before` exact)."""
        if self._zk is not None:
            return await self._zk.swap(path, guard, value, records)
        tx = self._client().transactions
        key = to_key(path)
        success = [tx.delete(key) if value is None else tx.put(key, value)]
        success += [tx.put(to_key(record_key), record) for record_key, record in records]
        ok, responses = await self._transaction([self._compare(guard)], success)
        if not ok:
            raise BadVersion(path)
        first = responses[0]
        return int(getattr(first, first.WhichOneof("response")).header.revision)

    async def put_ephemeral(self, path: str, value: bytes, lease_id: int) -> None:
        """Write a key attached to a lease: it vanishes when the lease expires."""
        if self._zk is not None:
            return await self._zk.put_ephemeral(path, value, lease_id)
        await self._call(lambda c: c.put(to_key(path), value, lease=lease_id))

    async def create_sequential(self, prefix: str, value: bytes, lease: int | None) -> str:
        """Create `prefix` + a ten-digit sequence number (ephemeral on `lease` when given),
        as each store numbers sequential keys (`backend.StoreBackend.create_sequential`);
        the path created."""
        if self._zk is not None:
            return await self._zk.create_sequential(prefix, value, lease)
        previous = await self._call(lambda c: c.put(to_key(prefix), b"", prev_kv=True))
        n = 0 if previous.prev_kv is None else int(previous.prev_kv.version)
        path = f"{prefix}{n:010d}"
        written, _ = await self.put_at_version(path, value, 0, lease=lease)
        if not written:
            raise AlreadyExists(path)
        return path

    async def grant_lease(self, ttl: int) -> int:
        if self._zk is not None:
            return await self._zk.grant_lease()
        lease = await self._call(lambda c: c.lease(ttl))
        return int(lease.id)

    async def refresh_lease(self, lease_id: int) -> bool:
        """Keep the lease alive; False when it has already expired."""
        if self._zk is not None:
            return await self._zk.refresh_lease(lease_id)
        reply = await self._call(lambda c: c.refresh_lease(lease_id))
        return reply is not None and int(reply.TTL) > 0

    async def revoke_lease(self, lease_id: int) -> None:
        """End the lease now: every key on it is deleted. A lease that already expired is
        ended too (no error)."""
        if self._zk is not None:
            return await self._zk.revoke_lease(lease_id)
        try:
            await self._call(lambda c: c.revoke_lease(lease_id))
        except aetcd.ClientError as exc:
            if "lease not found" not in str(exc):
                raise

    # -- etcd versions (Pulsar's metadata-store versions: `metastore.versioned_keys`) --------

    async def get_with_version(self, path: str) -> tuple[bytes, int] | None:
        """The value and its etcd `version` (1 after creation, +1 per write), or None."""
        if self._zk is not None:
            return await self._zk.get_with_version(path)
        result = await self._call(lambda c: c.get(to_key(path)))
        return None if result is None else (result.value, int(result.version))

    async def scan(
        self, start: str, end: str, *, limit: int, keys_only: bool = False
    ) -> tuple[list[tuple[str, bytes, int]], bool]:
        """Up to `limit` keys in [start, end) in key order, as (path, value, etcd version),
        in one bounded range request, and whether more keys follow."""
        if self._zk is not None:
            return await self._zk.scan(start, end, limit=limit, keys_only=keys_only)
        if limit < 1:
            raise ValueError("limit must be at least 1")
        response = await self._range(rpc.RangeRequest(
            key=start.encode(), range_end=end.encode(), limit=limit, keys_only=keys_only
        ))  # fmt: skip
        items = [(kv.key.decode(), kv.value, int(kv.version)) for kv in response.kvs]
        return items, bool(response.more)

    async def put_at_version(
        self, path: str, value: bytes, version: int, *, lease: int | None = None
    ) -> tuple[bool, bool]:
        """Write `value` (on `lease`, if given) only if the key's etcd version is `version`
        (0: absent). Returns (written, whether the key exists when not written)."""
        if self._zk is not None:
            return await self._zk.put_at_version(path, value, version, lease=lease)
        tx = self._client().transactions
        key = to_key(path)
        ok, responses = await self._transaction(
            [tx.version(key) == version], [tx.put(key, value, lease=lease)], [tx.get(key)]
        )
        return ok, (not ok and bool(responses and responses[0]))

    async def put_returning_version(self, path: str, value: bytes) -> int:
        """An unconditional write; the etcd version the key had before it (0: absent)."""
        if self._zk is not None:
            return await self._zk.put_returning_version(path, value)
        result = await self._call(lambda c: c.put(to_key(path), value, prev_kv=True))
        return 0 if result.prev_kv is None else int(result.prev_kv.version)

    async def delete_at_version(self, path: str, version: int | None) -> tuple[bool, bool]:
        """Delete the key if it exists and, when `version` is given, is at that etcd version.
        Returns (deleted, whether the key exists when not deleted)."""
        if self._zk is not None:
            return await self._zk.delete_at_version(path, version)
        tx = self._client().transactions
        key = to_key(path)
        compare = [tx.version(key) > 0]
        if version is not None:
            compare.append(tx.version(key) == version)
        ok, responses = await self._transaction(compare, [tx.delete(key)], [tx.get(key)])
        return ok, (not ok and bool(responses and responses[0]))

    # -- change history (metastore.change_history) -----------------------------------------

    def change_record(self, context: ChangeContext, change: KeyChange) -> tuple[str, bytes]:
        """Group commit's record of one update."""
        return self.change_log.record(context, [change])

    async def _range(self, request: rpc.RangeRequest) -> Any:
        """A range request with the options the client's helpers leave out (limits, sorting
        and filters by revision), sent on the client's own stub (connected first: the stub
        exists only once the client has connected)."""

        async def call(client: aetcd.Client) -> Any:
            await client.connect()
            return await client.kvstub.Range(request, timeout=self.timeout,
                                             metadata=client.metadata)

        return await self._call(call)

    def _history_request(self, **options: Any) -> rpc.RangeRequest:
        start, end = child_range(paths.CHANGE_HISTORY)
        return rpc.RangeRequest(key=start, range_end=end, **options)

    async def read_changes(
        self, since: int = 0, limit: int = 1000, prefix: str = ""
    ) -> list[ChangeRecord]:
        """Up to `limit` change records of transactions after revision `since`, touching
        `prefix` (see `ChangeRecord.touches`), ordered by revision and, within one
        transaction, as written. A transaction's records are never split between pages
        (unless one transaction alone holds more than `limit`)."""
        if self._zk is not None:
            return await self._zk.read_changes(since, limit, prefix)
        found: list[ChangeRecord] = []
        page = max(limit, 100)
        while len(found) < limit:
            response = await self._range(self._history_request(
                min_create_revision=since + 1, limit=page,
                sort_order=rpc.RangeRequest.ASCEND, sort_target=rpc.RangeRequest.CREATE,
            ))  # fmt: skip
            records = self._decode_changes(response.kvs)
            if not records:
                break
            last = records[-1].revision
            if response.more:
                whole = [r for r in records if r.revision < last]
                if not whole:  # one transaction fills the page: read all of it
                    whole = await self._changes_at(last)
                records = whole
            records.sort(key=lambda r: (r.revision, r.sequence))
            for record in records:
                if not prefix or record.touches(prefix):
                    found.append(record)
            since = records[-1].revision
            if not response.more:
                break
        return whole_transactions(found, limit)

    async def _changes_at(self, revision: int) -> list[ChangeRecord]:
        response = await self._range(self._history_request(
            min_create_revision=revision, max_create_revision=revision
        ))  # fmt: skip
        return self._decode_changes(response.kvs)

    def _decode_changes(self, kvs: Any) -> list[ChangeRecord]:
        return [
            self.change_log.decode(kv.key.decode(), kv.value, int(kv.create_revision))
            for kv in kvs
        ]

    async def prune_changes(self, max_records: int, max_age_seconds: float) -> int:
        """Delete the oldest change records beyond `max_records` (<= 0: no limit) and those
        older than `max_age_seconds` (<= 0: no limit); how many were deleted."""
        if self._zk is not None:
            return await self._zk.prune_changes(max_records, max_age_seconds)
        deleted = 0
        tx = self._client().transactions
        if max_age_seconds > 0:
            start, _ = child_range(paths.CHANGE_HISTORY)
            cutoff = to_key(self.change_log.age_cutoff_key(max_age_seconds))
            _, responses = await self._transaction([], [tx.delete(start, range_end=cutoff)])
            deleted += int(responses[0].response_delete_range.deleted)
        if max_records > 0:
            counted = await self._range(self._history_request(count_only=True))
            excess = int(counted.count) - max_records
            if excess > 0:
                oldest = await self._range(self._history_request(
                    limit=excess, keys_only=True,
                    sort_order=rpc.RangeRequest.ASCEND, sort_target=rpc.RangeRequest.CREATE,
                ))  # fmt: skip
                keys = [kv.key for kv in oldest.kvs]
                for at in range(0, len(keys), PRUNE_BATCH):
                    ops = [tx.delete(key) for key in keys[at : at + PRUNE_BATCH]]
                    await self._transaction([], ops)
                deleted += len(keys)
        return deleted

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
