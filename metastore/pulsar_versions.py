"""Pulsar's metadata-store semantics on etcd, for the binary records BookKeeper and the
managed ledger keep (ledger metadata, ManagedLedgerInfo, cursors, ledger-id generation).

Pulsar's `EtcdMetadataStore` exposes a key's version as etcd's `version - 1` (0 right after
creation, +1 per write) and builds every conditional write as one etcd transaction:

- create-if-absent (Pulsar's expected version -1): compare `create_revision == 0`;
- compare-and-swap at version v: compare `version == v + 1`;
- delete at version v: the same compare; a delete of a missing key is `NotFound`;
- ephemeral: the put carries a lease;
- a plain put returns the previous value's etcd version, i.e. the Pulsar version of the new
  value (what its sequential keys are numbered with).

These functions keep those meanings exactly, so a Pulsar broker or BookKeeper tool sharing the
etcd sees the versions it expects. They use only `MetadataStore.call` and the client's
transaction builders (the store's public surface). `scan` pages through a key range with a
limit per request, which the etcd client library does not offer, so it issues the range
request itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import aetcd
from aetcd import rpc

from metastore.errors import AlreadyExists, BadVersion, NotFound, Unavailable
from metastore.store import MetadataStore, to_key


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


async def read(store: MetadataStore, path: str) -> Stored | None:
    found = await store.call(lambda c: c.get(to_key(path)))
    return None if found is None else Stored(found.value, found.version - 1)


async def create(store: MetadataStore, path: str, value: bytes, lease: int | None = None) -> int:
    """Write `value` only if the key does not exist (`AlreadyExists` otherwise); version 0."""
    key = to_key(path)
    tx = store.client.transactions
    ok, _ = await store.call(
        lambda c: c.transaction(
            compare=[tx.create(key) == 0], success=[tx.put(key, value, lease)], failure=[]
        )
    )
    if not ok:
        raise AlreadyExists(path)
    return 0


async def put_at_version(store: MetadataStore, path: str, value: bytes, expected: int) -> int:
    """Compare-and-swap: write `value` only if the key is at Pulsar version `expected`;
    `NotFound` when the key is gone, `BadVersion` when it moved on. The new version."""
    key = to_key(path)
    tx = store.client.transactions
    ok, responses = await store.call(
        lambda c: c.transaction(
            compare=[tx.version(key) == expected + 1],
            success=[tx.put(key, value)],
            failure=[tx.get(key)],
        )
    )
    if not ok:
        raise BadVersion(path) if responses and responses[0] else NotFound(path)
    return expected + 1


async def put(store: MetadataStore, path: str, value: bytes) -> int:
    """An unconditional write; the Pulsar version of the value written."""
    result = await store.call(lambda c: c.put(to_key(path), value, prev_kv=True))
    return 0 if result.prev_kv is None else int(result.prev_kv.version)


async def delete(store: MetadataStore, path: str, expected: int | None = None) -> None:
    """Delete the key, only at Pulsar version `expected` when given; `NotFound` when it is
    absent, `BadVersion` when it moved on."""
    key = to_key(path)
    tx = store.client.transactions
    compare = [tx.version(key) > 0]
    if expected is not None:
        compare.append(tx.version(key) == expected + 1)
    ok, responses = await store.call(
        lambda c: c.transaction(compare=compare, success=[tx.delete(key)], failure=[tx.get(key)])
    )
    if not ok:
        raise BadVersion(path) if responses and responses[0] else NotFound(path)


async def exists(store: MetadataStore, path: str) -> bool:
    return await store.get(path) is not None


async def scan(
    store: MetadataStore, start: str, end: str, *, limit: int, keys_only: bool = False
) -> Page:
    """Up to `limit` keys in [start, end), in key order."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    request = rpc.RangeRequest(
        key=start.encode(), range_end=end.encode(), limit=limit, keys_only=keys_only
    )

    async def call(client: aetcd.Client) -> rpc.RangeResponse:
        await client.connect()
        try:
            response: rpc.RangeResponse = await client.kvstub.Range(
                request, timeout=store.timeout, metadata=client.metadata
            )
        except rpc.AioRpcError as exc:  # the client library maps these only in its calls
            raise Unavailable(f"metadata store unavailable: {exc.code().name}") from exc
        return response

    response = await store.call(call)
    items = [(kv.key.decode(), kv.value, kv.version - 1) for kv in response.kvs]
    return Page(items, bool(response.more))
