"""Keys with Pulsar's metadata-store versions on etcd, for the binary records BookKeeper and
the managed ledger keep (ledger metadata, ManagedLedgerInfo, cursors, ledger-id counters).

Pulsar's `EtcdMetadataStore` exposes a key's version as etcd's `version - 1` (0 right after
creation, +1 per write) and builds every conditional write as one etcd transaction:

- create-if-absent (Pulsar's expected version -1): compare `create_revision == 0`;
- compare-and-swap at version v: compare `version == v + 1`;
- delete at version v: the same compare; a delete of a missing key is `NotFound`;
- ephemeral: the put carries a lease;
- a plain put returns the previous value's etcd version, i.e. the Pulsar version of the new
  value (what its sequential keys are numbered with).

`VersionedKeys` keeps those meanings exactly, so a Pulsar broker or BookKeeper tool sharing
the etcd sees the versions it expects. It holds its own etcd connection, opened on first use
to the same endpoints as the `MetadataStore` it is made from (`VersionedKeys.of(store)`), so it
needs nothing of the store but its public endpoints and timeout. Every call fails within the
timeout with `Unavailable` when etcd cannot be reached, and then moves to the next endpoint.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import aetcd
from aetcd import rpc

from metastore.errors import AlreadyExists, BadVersion, NotFound, Unavailable
from metastore.store import Endpoint, MetadataStore, child_range, to_key

T = TypeVar("T")

_UNAVAILABLE_ERRORS = (
    aetcd.ConnectionFailedError,
    aetcd.ConnectionTimeoutError,
    aetcd.InternalError,
    rpc.AioRpcError,
    asyncio.TimeoutError,
    OSError,
)


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
    def __init__(self, endpoints: Sequence[Endpoint], timeout: float = 5.0) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is required")
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self._current = 0
        self._etcd: aetcd.Client | None = None

    @classmethod
    def of(cls, store: MetadataStore) -> VersionedKeys:
        """A connection to the same etcd as `store`, with its timeout."""
        return cls(store.endpoints, store.timeout)

    async def close(self) -> None:
        if self._etcd is not None:
            client, self._etcd = self._etcd, None
            await client.close()

    # -- reads ------------------------------------------------------------------------------

    async def read(self, path: str) -> Stored | None:
        found = await self._call(lambda c: c.get(to_key(path)))
        return None if found is None else Stored(found.value, found.version - 1)

    async def exists(self, path: str) -> bool:
        return await self.read(path) is not None

    async def children(self, path: str) -> list[str]:
        """Names of the direct children of `path`, sorted, as Pulsar's etcd store lists them
        (keys under `path + "/"`; the parent key need not exist)."""
        start, _ = child_range(path)
        found = await self._call(lambda c: c.get_prefix(start, keys_only=True))
        return sorted({kv.key[len(start) :].decode().split("/", 1)[0] for kv in found})

    async def scan(self, start: str, end: str, *, limit: int, keys_only: bool = False) -> Page:
        """Up to `limit` keys in [start, end), in key order (one bounded range request)."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        request = rpc.RangeRequest(
            key=start.encode(), range_end=end.encode(), limit=limit, keys_only=keys_only
        )

        async def call(client: aetcd.Client) -> Any:
            # The client library has no range limit; send the range request itself.
            await client.connect()
            return await client.kvstub.Range(
                request, timeout=self.timeout, metadata=client.metadata
            )

        response = await self._call(call)
        items = [(kv.key.decode(), kv.value, kv.version - 1) for kv in response.kvs]
        return Page(items, bool(response.more))

    # -- writes -----------------------------------------------------------------------------

    async def create(self, path: str, value: bytes, lease: int | None = None) -> int:
        """Write `value` only if the key does not exist (`AlreadyExists` otherwise), on
        `lease` when given (an ephemeral key); version 0."""
        key = to_key(path)
        ok, _ = await self._transaction(
            lambda tx: [tx.create(key) == 0], lambda tx: [tx.put(key, value, lease)], None
        )
        if not ok:
            raise AlreadyExists(path)
        return 0

    async def put_at_version(self, path: str, value: bytes, expected: int) -> int:
        """Compare-and-swap: write `value` only if the key is at Pulsar version `expected`;
        `NotFound` when the key is gone, `BadVersion` when it moved on. The new version."""
        key = to_key(path)
        ok, responses = await self._transaction(
            lambda tx: [tx.version(key) == expected + 1],
            lambda tx: [tx.put(key, value)],
            lambda tx: [tx.get(key)],
        )
        if not ok:
            raise BadVersion(path) if responses and responses[0] else NotFound(path)
        return expected + 1

    async def put(self, path: str, value: bytes) -> int:
        """An unconditional write; the Pulsar version of the value written."""
        result = await self._call(lambda c: c.put(to_key(path), value, prev_kv=True))
        return 0 if result.prev_kv is None else int(result.prev_kv.version)

    async def delete(self, path: str, expected: int | None = None) -> None:
        """Delete the key, only at Pulsar version `expected` when given; `NotFound` when it is
        absent, `BadVersion` when it moved on."""
        key = to_key(path)

        def compare(tx: Any) -> list[Any]:
            checks = [tx.version(key) > 0]
            if expected is not None:
                checks.append(tx.version(key) == expected + 1)
            return checks

        ok, responses = await self._transaction(
            compare, lambda tx: [tx.delete(key)], lambda tx: [tx.get(key)]
        )
        if not ok:
            raise BadVersion(path) if responses and responses[0] else NotFound(path)

    async def delete_tree(self, path: str) -> None:
        """Delete `path` and every key under `path + "/"` in one transaction."""
        start, end = child_range(path)
        await self._transaction(
            lambda tx: [],
            lambda tx: [tx.delete(to_key(path)), tx.delete(start, range_end=end)],
            None,
        )

    # -- leases -----------------------------------------------------------------------------

    async def grant_lease(self, ttl: int) -> int:
        lease = await self._call(lambda c: c.lease(ttl))
        return int(lease.id)

    async def refresh_lease(self, lease_id: int) -> bool:
        """Keep the lease alive; False when it has already expired."""
        reply = await self._call(lambda c: c.refresh_lease(lease_id))
        return reply is not None and int(reply.TTL) > 0

    async def revoke_lease(self, lease_id: int) -> None:
        """End the lease now; one that already expired is ended too (no error)."""
        try:
            await self._call(lambda c: c.revoke_lease(lease_id))
        except aetcd.exceptions.ClientError as exc:
            if "lease not found" not in str(exc):
                raise

    # -- connection -------------------------------------------------------------------------

    def _client(self) -> aetcd.Client:
        if self._etcd is None:
            endpoint = self.endpoints[self._current]
            self._etcd = aetcd.Client(
                host=endpoint.host,
                port=endpoint.port,
                timeout=self.timeout,
                connect_wait_timeout=int(self.timeout),
            )
        return self._etcd

    async def _call(self, make: Callable[[aetcd.Client], Awaitable[T]]) -> T:
        try:
            async with asyncio.timeout(self.timeout):
                return await make(self._client())
        except _UNAVAILABLE_ERRORS as exc:
            if len(self.endpoints) > 1:
                self._current = (self._current + 1) % len(self.endpoints)
                await self.close()
            raise Unavailable(f"metadata store unavailable: {type(exc).__name__}") from exc

    async def _transaction(
        self,
        compare: Callable[[Any], list[Any]],
        success: Callable[[Any], list[Any]],
        failure: Callable[[Any], list[Any]] | None,
    ) -> tuple[bool, list[Any]]:
        def run(client: aetcd.Client) -> Awaitable[tuple[bool, list[Any]]]:
            tx = client.transactions
            return client.transaction(
                compare=compare(tx),
                success=success(tx),
                failure=failure(tx) if failure is not None else [],
            )

        ok, responses = await self._call(run)
        return bool(ok), list(responses)
