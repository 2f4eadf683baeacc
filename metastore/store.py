"""Async access to etcd with Pulsar's path-to-key mapping.

Every read-modify-write is a transaction that compares the key's `mod_revision` and retries
on conflict. Concurrent writers of one key in one process share a single transaction (group
commit), so CAS conflicts only come from other processes. Every call fails within `timeout`
seconds with `Unavailable` when etcd cannot be reached; a failed call writes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import aetcd

from metastore.codec import load_json
from metastore.errors import AlreadyExists, BadVersion, NotFound, Unavailable, ValueTooLarge
from metastore.group_commit import (
    MAX_CAS_ATTEMPTS,
    Draft,
    KeyWriter,
    PendingUpdate,
    RevisionGuard,
    SwapGuard,
    conflict_backoff,
)
from metastore.versioned import NOT_CACHED, NotCached, Versioned

log = logging.getLogger(__name__)

T = TypeVar("T")

# Reconnect quickly after etcd comes back instead of gRPC's default two-minute backoff.
_CHANNEL_OPTIONS = {
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.min_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 1000,
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 3_000,
    "grpc.max_receive_message_length": 64 * 1024 * 1024,
}
_UNAVAILABLE_ERRORS = (
    aetcd.ConnectionFailedError,
    aetcd.ConnectionTimeoutError,
    aetcd.InternalError,
    asyncio.TimeoutError,
    OSError,
)


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_metadata_store_url(url: str) -> list[Endpoint]:
    """Parse Pulsar's `etcd:http://h1:p1,h2:p2` form (the `etcd:` prefix is optional)."""
    body = url.removeprefix("etcd:")
    endpoints = []
    for item in body.split(","):
        item = item.strip()
        for scheme in ("http://", "https://"):
            item = item.removeprefix(scheme)
        host, sep, port = item.rstrip("/").rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"invalid etcd endpoint {item!r} in metadata store URL {url!r}")
        endpoints.append(Endpoint(host.strip("[]"), int(port)))
    return endpoints


def to_key(path: str) -> bytes:
    return path.encode()


def child_range(path: str) -> tuple[bytes, bytes]:
    """The etcd key range of everything under `path + "/"`."""
    prefix = (path.rstrip("/") + "/").encode()
    return prefix, prefix[:-1] + bytes([prefix[-1] + 1])


@dataclass(frozen=True)
class Guard:
    """A condition of `MetadataStore.commit`: the key `path` is still at mod_revision
    `revision` (0: still absent); with `tree=True`, no key under `path + "/"` was written
    after `revision` (keys deleted since do not fail it)."""

    path: str
    revision: int
    tree: bool = False

    def compare(self, tx: Any) -> Any:
        if not self.tree:
            return tx.mod(to_key(self.path)) == self.revision
        start, end = child_range(self.path)
        return tx.mod(start, range_end=end) < self.revision + 1


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
    def __init__(
        self, endpoints: Sequence[Endpoint], timeout: float = 5.0, pipeline_depth: int = 1
    ) -> None:
        """`pipeline_depth`: transactions of one key in flight at once (`group_commit`)."""
        if not endpoints:
            raise ValueError("at least one etcd endpoint is required")
        if pipeline_depth < 1:
            raise ValueError("pipeline_depth must be at least 1")
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self.pipeline_depth = pipeline_depth
        self._current = 0
        self._client: aetcd.Client | None = None
        self._pending: dict[str, list[PendingUpdate]] = {}
        self._writers: dict[str, tuple[KeyWriter, asyncio.Task[None]]] = {}
        self._caches: list[KeyCache] = []
        # The parsed JSON of this process's last write per key, reused while etcd still holds
        # that revision (saves parsing a large document, e.g. the rack map, on every batch).
        self._parsed: dict[str, tuple[int, Any]] = {}

    # -- connection -------------------------------------------------------------------------

    @property
    def client(self) -> aetcd.Client:
        if self._client is None:
            endpoint = self.endpoints[self._current]
            self._client = aetcd.Client(
                host=endpoint.host,
                port=endpoint.port,
                timeout=self.timeout,
                options=_CHANNEL_OPTIONS,
                connect_wait_timeout=int(self.timeout),
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def _failover(self) -> None:
        """Move to the next endpoint after a failure (only when there is more than one)."""
        if len(self.endpoints) > 1:
            self._current = (self._current + 1) % len(self.endpoints)
            await self.close()

    async def call(self, make: Callable[[aetcd.Client], Awaitable[T]]) -> T:
        """Run one etcd call within the timeout, mapping transport errors to `Unavailable`."""
        try:
            async with asyncio.timeout(self.timeout):  # unlike wait_for, no task per call
                return await make(self.client)
        except _UNAVAILABLE_ERRORS as exc:
            await self._failover()
            raise Unavailable(f"metadata store unavailable: {type(exc).__name__}") from exc
        except aetcd.InvalidArgumentError as exc:
            if "too large" in str(exc):
                raise ValueTooLarge() from exc
            raise

    # -- reads ------------------------------------------------------------------------------

    async def get(self, path: str) -> Versioned | None:
        result = await self.call(lambda c: c.get(to_key(path)))
        if result is None:
            return None
        return Versioned(result.value, result.mod_revision)

    async def get_json(self, path: str) -> Any | None:
        found = await self.get(path)
        return None if found is None else load_json(found.value)

    async def exists(self, path: str) -> bool:
        return await self.get(path) is not None

    async def get_children_values(self, path: str) -> dict[str, Versioned]:
        """Every key under `path + "/"`, by full path."""
        start, _ = child_range(path)
        result = await self.call(lambda c: c.get_prefix(start))
        return {kv.key.decode(): Versioned(kv.value, kv.mod_revision) for kv in result}

    async def children(self, path: str) -> list[str]:
        """Names of the direct children of `path`, sorted (as Pulsar's etcd store lists them)."""
        start, _ = child_range(path)
        result = await self.call(lambda c: c.get_prefix(start, keys_only=True))
        cut = len(start)
        return sorted({kv.key[cut:].decode().split("/", 1)[0] for kv in result})

    # -- writes -----------------------------------------------------------------------------

    async def put(self, path: str, value: bytes, expected_revision: int | None = None) -> int:
        """Write `value`; with `expected_revision`, only if the key is still at that revision
        (0 means: only if the key does not exist). Returns the new revision."""
        key = to_key(path)
        if expected_revision is None:
            result = await self.call(lambda c: c.put(key, value))
            return int(result.header.revision)
        tx = self.client.transactions
        ok, responses = await self.call(
            lambda c: c.transaction(
                compare=[tx.mod(key) == expected_revision],
                success=[tx.put(key, value)],
                failure=[],
            )
        )
        if not ok:
            raise AlreadyExists(path) if expected_revision == 0 else BadVersion(path)
        return int(responses[0].response_put.header.revision)

    async def create(self, path: str, value: bytes) -> int:
        return await self.put(path, value, expected_revision=0)

    async def delete(self, path: str, expected_revision: int | None = None) -> int:
        """Delete the key and return the revision of the deletion; `NotFound` when it is
        absent, `BadVersion` when it changed since `expected_revision`."""
        key = to_key(path)
        tx = self.client.transactions
        compare = [tx.version(key) > 0]
        if expected_revision is not None:
            compare.append(tx.mod(key) == expected_revision)
        ok, responses = await self.call(
            lambda c: c.transaction(compare=compare, success=[tx.delete(key)], failure=[])
        )
        if not ok:
            if expected_revision is not None and await self.exists(path):
                raise BadVersion(path)
            raise NotFound(path)
        return int(responses[0].response_delete_range.header.revision)

    async def delete_tree(self, path: str) -> None:
        """Delete `path` and everything under it, atomically."""
        start, end = child_range(path)
        tx = self.client.transactions
        await self.call(
            lambda c: c.transaction(
                compare=[],
                success=[tx.delete(to_key(path)), tx.delete(start, range_end=end)],
                failure=[],
            )
        )

    async def commit(
        self,
        guards: Sequence[Guard],
        puts: Mapping[str, bytes] | None = None,
        delete_trees: Sequence[str] = (),
    ) -> None:
        """One etcd transaction over several keys: when every guard holds, write `puts` and
        delete each of `delete_trees` (the key and everything under it); otherwise nothing is
        written and `BadVersion` is raised."""
        tx = self.client.transactions
        compare = [guard.compare(tx) for guard in guards]
        success = [tx.put(to_key(path), value) for path, value in (puts or {}).items()]
        for path in delete_trees:
            start, end = child_range(path)
            success += [tx.delete(to_key(path)), tx.delete(start, range_end=end)]
        ok, _ = await self.call(
            lambda c: c.transaction(compare=compare, success=success, failure=[])
        )
        if not ok:
            raise BadVersion(", ".join(guard.path for guard in guards))

    async def put_ephemeral(self, path: str, value: bytes, lease_id: int) -> None:
        """Write a key attached to a lease: it vanishes when the lease expires."""
        await self.call(lambda c: c.put(to_key(path), value, lease=lease_id))

    async def grant_lease(self, ttl: int) -> int:
        lease = await self.call(lambda c: c.lease(ttl))
        return int(lease.id)

    async def refresh_lease(self, lease_id: int) -> None:
        await self.call(lambda c: c.refresh_lease(lease_id))

    # -- read-modify-write --------------------------------------------------------------------

    def attach_cache(self, cache: KeyCache) -> None:
        """Let updates start from `cache` (saving a read) and write through to it."""
        self._caches.append(cache)

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

        return await self._enqueue(path, apply)

    async def update_json(
        self,
        path: str,
        mutate: Callable[[Any], Any],
        finalize: Callable[[Any], Any] | None = None,
    ) -> Versioned | None:
        """`update` on the parsed JSON document: `mutate(doc)` returns the new document (it
        may change `doc` in place, but only after its last check that can raise), None to
        delete, or UNCHANGED. A batch of JSON updates parses and serialises once;
        `finalize(doc)` runs once before serialising (e.g. to sort keys)."""

        def apply(draft: Draft) -> None:
            result = mutate(draft.doc())
            if not isinstance(result, Unchanged):
                draft.set_doc(result, finalize)

        return await self._enqueue(path, apply)

    async def _enqueue(self, path: str, apply: Callable[[Draft], None]) -> Versioned | None:
        future: asyncio.Future[Versioned | None] = asyncio.get_running_loop().create_future()
        self._pending.setdefault(path, []).append((apply, future))
        if path in self._writers:
            self._writers[path][0].wake()
        else:
            writer = KeyWriter(self, path)
            task = asyncio.create_task(self._write(writer), name=f"update {path}")
            self._writers[path] = (writer, task)
        return await future

    async def _write(self, writer: KeyWriter) -> None:
        try:
            await writer.run()
        finally:
            self._writers.pop(writer.path, None)

    def _cached(self, path: str) -> Versioned | NotCached | None:
        for cache in self._caches:
            known = cache.peek(path)
            if not isinstance(known, NotCached):
                return known
        return NOT_CACHED

    def _write_through(self, path: str, value: bytes | None, revision: int) -> None:
        for cache in self._caches:
            cache.observe(path, value, revision)

    async def _swap_guarded(self, path: str, guard: SwapGuard, new_value: bytes | None) -> int:
        """Write `new_value` (None: delete) if `guard` holds; the new revision, else
        `BadVersion`."""
        key = to_key(path)
        tx = self.client.transactions
        if isinstance(guard, RevisionGuard):
            compare = [tx.mod(key) == guard.revision]
        elif guard.value is None:
            compare = [tx.version(key) == 0]
        else:
            compare = [tx.value(key) == guard.value]
        change = tx.put(key, new_value) if new_value is not None else tx.delete(key)
        ok, responses = await self.call(
            lambda c: c.transaction(compare=compare, success=[change], failure=[])
        )
        if not ok:
            raise BadVersion(path)
        response = responses[0]
        return int(
            (response.response_put if new_value is not None else response.response_delete_range)
            .header.revision
        )


async def retry_on_conflict(attempt: Callable[[], Awaitable[T]]) -> T:
    """Run a read-then-`commit` attempt again while its guards lose to a concurrent writer."""
    for number in range(MAX_CAS_ATTEMPTS):
        try:
            return await attempt()
        except BadVersion:
            await conflict_backoff(number)
    raise BadVersion("too many concurrent modifications")
