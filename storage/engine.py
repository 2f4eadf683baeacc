"""Assembly of the client side of the storage engine on etcd: the ledger client and the
managed-ledger factory over `metastore`'s stores, which keep the metadata the way Pulsar's
BookKeeper driver and managed ledger do (V3 ledger metadata at the hierarchical keys, ids from
`/ledgers/idgen`, ManagedLedgerInfo at `/managed-ledgers/...`, Pulsar's versions)."""

from __future__ import annotations

import contextlib
import json
import random

from metastore.errors import AlreadyExists, BadVersion, NotFound
from metastore.ledger_ids import LedgerIdGenerator
from metastore.ledgers import LedgerMetadataStore
from metastore.managed_ledger_info import LedgerInfo as StoredLedgerInfo
from metastore.managed_ledger_info import ManagedLedgerInfo
from metastore.managed_ledgers import ManagedLedgerName, ManagedLedgerStore
from metastore.repositories import Repositories
from metastore.store import Guard, MetadataStore
from metastore.versioned_keys import VersionedKeys
from placement import PlacementConfig
from storage.ledger import BookiePool, LedgerClient, LedgerMetadata, VersionConflict
from storage.ledger.client import TopologySource
from storage.managed_ledger import (
    InfoVersionConflict,
    LedgerInfo,
    ManagedLedgerFactory,
    NamespaceNotWritable,
)
from storage.managed_ledger.names import split_managed_ledger_name


class EtcdLedgerMetadata:
    """`storage.ledger.MetadataBackend` on metastore's ledger store and id generator."""

    def __init__(self, keys: VersionedKeys) -> None:
        self.keys = keys
        self.ledgers = LedgerMetadataStore(keys)
        self.ids = LedgerIdGenerator(keys)

    async def next_ledger_id(self) -> int:
        return await self.ids.generate()

    async def create(self, metadata: LedgerMetadata) -> int | None:
        try:
            return (await self.ledgers.create(metadata)).version
        except AlreadyExists:
            return None

    async def read(self, ledger_id: int) -> tuple[LedgerMetadata, int] | None:
        found = await self.ledgers.get(ledger_id)
        return None if found is None else (found.metadata, found.version)

    async def write(self, metadata: LedgerMetadata, version: int) -> int:
        try:
            return (await self.ledgers.write(metadata, version)).version
        except (BadVersion, NotFound) as exc:
            raise VersionConflict(str(exc)) from exc

    async def delete(self, ledger_id: int) -> bool:
        try:
            await self.ledgers.delete(ledger_id)
        except NotFound:
            return False
        return True

    async def close(self) -> None:
        await self.ids.close()
        await self.keys.close()


class EtcdManagedLedgerInfo:
    """`storage.managed_ledger.InfoBackend` on metastore's managed-ledger store."""

    def __init__(self, keys: VersionedKeys, *, namespace_guard: bool = False) -> None:
        self.store = ManagedLedgerStore(keys)
        self.namespace_guard = namespace_guard

    async def read(self, name: str) -> tuple[list[LedgerInfo], int] | None:
        found = await self.store.get(_name(name))
        if found is None:
            return None
        ledgers = [LedgerInfo(i.ledger_id, i.entries or 0, i.size or 0, i.timestamp or 0)
                   for i in found.info.ledgers]
        return ledgers, found.version

    async def create_empty(self, name: str) -> int:
        """Create the key (empty); with `namespace_guard`, only while the namespace's
        policies exist without Pulsar's `deleted` mark, in one transaction guarded by their
        revision: a namespace delete, which marks the policies first, and a topic's creation
        never both succeed. The key's version (also when another opener created it first)."""
        ml = _name(name)
        if not self.namespace_guard:
            return (await self.store.open(ml)).version
        docs = Repositories(self.store.keys.store)
        for _ in range(CREATE_ATTEMPTS):
            existing = await self.store.get(ml)
            if existing is not None:
                return existing.version
            policies = await docs.policies.get(ml.tenant, ml.namespace)
            deleted = policies is not None and _marked_deleted(policies.raw)
            if policies is None or deleted:
                raise NamespaceNotWritable(name, f"{ml.tenant}/{ml.namespace}", deleted)
            with contextlib.suppress(BadVersion):  # policies changed, or another opener won
                await (
                    docs.transaction()
                    .require(docs.policies.at(ml.tenant, ml.namespace, version=policies.version),
                             Guard(ml.path))
                    .put_record(ml.path, b"")
                    .commit()
                )  # fmt: skip
                return 0
        raise InfoVersionConflict(f"{ml.path}: the namespace's policies kept changing")

    async def write(self, name: str, ledgers: list[LedgerInfo], version: int) -> int:
        info = ManagedLedgerInfo(ledgers=tuple(
            StoredLedgerInfo(i.ledger_id, i.entries, i.size, i.timestamp) for i in ledgers))
        try:
            return (await self.store.write(_name(name), info, version)).version
        except (BadVersion, NotFound) as exc:
            raise InfoVersionConflict(str(exc)) from exc

    async def delete(self, name: str) -> None:
        with contextlib.suppress(NotFound):
            await self.store.delete(_name(name))


CREATE_ATTEMPTS = 20


def _marked_deleted(policies: bytes) -> bool:
    """Pulsar's `Policies.deleted`: the namespace is being deleted."""
    try:
        document = json.loads(policies)
    except ValueError:
        return False
    return isinstance(document, dict) and document.get("deleted") is True


def _name(name: str) -> ManagedLedgerName:
    tenant, namespace, topic = split_managed_ledger_name(name)
    return ManagedLedgerName(tenant, namespace, topic)


def build_ledger_client(
    store: MetadataStore,
    bookies: BookiePool,
    topology: TopologySource,
    config: PlacementConfig,
    rng: random.Random | None = None,
) -> LedgerClient:
    """The ledger client; its metadata goes through its own versioned-key connection."""
    return LedgerClient(EtcdLedgerMetadata(VersionedKeys.of(store)), bookies, topology, config,
                        rng)


def build_managed_ledger_factory(store: MetadataStore, client: LedgerClient, *,
                                 namespace_guard: bool = False) -> ManagedLedgerFactory:
    """`namespace_guard`: a topic's key is created only inside a live namespace (the
    service's topics); without it, anywhere (the storage engine on its own)."""
    return ManagedLedgerFactory(client, EtcdManagedLedgerInfo(VersionedKeys.of(store),
                                                              namespace_guard=namespace_guard))
