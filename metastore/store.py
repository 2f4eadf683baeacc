"""Async access to etcd with Pulsar's path-to-key mapping.

Every read-modify-write is a transaction that compares the key's `mod_revision` and retries
on conflict. Writers in one process are also serialised per key, so CAS conflicts only come
from other processes. Every call fails within `timeout` seconds with `Unavailable` when etcd
cannot be reached; a failed call writes nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import aetcd

from metastore.errors import AlreadyExists, BadVersion, NotFound, Unavailable

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
MAX_CAS_ATTEMPTS = 64


@dataclass(frozen=True)
class Versioned:
    """A value and the etcd `mod_revision` it was read at."""

    value: bytes
    revision: int


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


class Unchanged:
    """Returned by an update function to leave the key as it is."""


UNCHANGED = Unchanged()
Mutation = Callable[[bytes | None], "bytes | Unchanged | None"]


class MetadataStore:
    def __init__(self, endpoints: Sequence[Endpoint], timeout: float = 5.0) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is required")
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self._current = 0
        self._client: aetcd.Client | None = None
        self._key_locks: dict[str, asyncio.Lock] = {}

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
            return await asyncio.wait_for(make(self.client), self.timeout)
        except _UNAVAILABLE_ERRORS as exc:
            await self._failover()
            raise Unavailable(f"metadata store unavailable: {type(exc).__name__}") from exc

    # -- reads ------------------------------------------------------------------------------

    async def get(self, path: str) -> Versioned | None:
        result = await self.call(lambda c: c.get(to_key(path)))
        if result is None:
            return None
        return Versioned(result.value, result.mod_revision)

    async def get_json(self, path: str) -> Any | None:
        found = await self.get(path)
        return None if found is None else json.loads(found.value)

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

    async def put_ephemeral(self, path: str, value: bytes, lease_id: int) -> None:
        """Write a key attached to a lease: it vanishes when the lease expires."""
        await self.call(lambda c: c.put(to_key(path), value, lease=lease_id))

    async def grant_lease(self, ttl: int) -> int:
        lease = await self.call(lambda c: c.lease(ttl))
        return int(lease.id)

    async def refresh_lease(self, lease_id: int) -> None:
        await self.call(lambda c: c.refresh_lease(lease_id))

    # -- read-modify-write --------------------------------------------------------------------

    @asynccontextmanager
    async def _local_writer(self, path: str) -> AsyncIterator[None]:
        lock = self._key_locks.setdefault(path, asyncio.Lock())
        async with lock:
            yield

    async def update(self, path: str, mutate: Mutation) -> Versioned | None:
        """Compare-and-swap loop: `mutate(current)` returns the new value, None to delete the
        key, or UNCHANGED. Exceptions from `mutate` abort with nothing written.
        Returns the key's state afterwards (None when it does not exist)."""
        async with self._local_writer(path):
            for attempt in range(MAX_CAS_ATTEMPTS):
                current = await self.get(path)
                new_value = mutate(None if current is None else current.value)
                if isinstance(new_value, Unchanged):
                    return current
                try:
                    revision = await self._swap(path, current, new_value)
                except BadVersion:
                    await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
                    continue
                return None if new_value is None else Versioned(new_value, revision)
        raise BadVersion(path)

    async def _swap(self, path: str, current: Versioned | None, new_value: bytes | None) -> int:
        if new_value is not None:
            return await self.put(path, new_value, 0 if current is None else current.revision)
        if current is None:
            return 0
        try:
            return await self.delete(path, current.revision)
        except NotFound as exc:
            raise BadVersion(path) from exc

    async def update_json(self, path: str, mutate: Callable[[Any | None], Any]) -> Versioned | None:
        """`update` for JSON documents; `mutate` gets and returns parsed JSON (or UNCHANGED)."""

        def on_bytes(raw: bytes | None) -> bytes | Unchanged | None:
            result = mutate(None if raw is None else json.loads(raw))
            if result is None or isinstance(result, Unchanged):
                return result
            return dump_json(result)

        return await self.update(path, on_bytes)


def dump_json(document: Any) -> bytes:
    """Compact JSON as Pulsar writes it (null fields are dropped by the models beforehand)."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
