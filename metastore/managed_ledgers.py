"""Topics' managed-ledger records at Pulsar's keys, with Pulsar's `MetaStoreImpl` semantics:

- a topic's key `/managed-ledgers/<tenant>/<ns>/persistent/<URL-encoded topic>` is first
  created with an empty value (version 0), which reads as a `ManagedLedgerInfo` with no
  ledgers; later writes are compare-and-swap puts at the version read;
- a cursor is a child key, `<topic key>/<URL-encoded subscription>`, holding
  `ManagedCursorInfo`; created with create-if-absent, then compare-and-swap;
- versions are Pulsar's (etcd version - 1).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from urllib.parse import unquote_plus

from metastore import paths
from metastore.errors import AlreadyExists, NotFound
from metastore.managed_ledger_info import (
    ManagedLedgerInfo,
    decode_cursor_info,
    decode_managed_ledger_info,
    encode_cursor_info,
    encode_managed_ledger_info,
)
from metastore.proto.managed_ledger_formats_pb2 import ManagedCursorInfo
from metastore.versioned_keys import VersionedKeys


@dataclass(frozen=True)
class ManagedLedgerName:
    """A persistent topic's managed ledger: `tenant/namespace/persistent/<encoded topic>`."""

    tenant: str
    namespace: str
    topic: str  # the topic's local name, not encoded

    @property
    def name(self) -> str:
        """Pulsar's managed-ledger name (`TopicName.getPersistenceNamingEncoding`)."""
        return f"{self.tenant}/{self.namespace}/persistent/{paths.url_encode(self.topic)}"

    @property
    def path(self) -> str:
        return paths.managed_ledger(self.tenant, self.namespace, paths.url_encode(self.topic))

    def cursor_path(self, cursor: str) -> str:
        return paths.managed_ledger_cursor(self.path, paths.url_encode(cursor))


@dataclass(frozen=True)
class VersionedManagedLedger:
    info: ManagedLedgerInfo
    version: int


@dataclass(frozen=True)
class VersionedCursor:
    info: ManagedCursorInfo
    version: int


class ManagedLedgerStore:
    def __init__(self, keys: VersionedKeys) -> None:
        self.keys = keys

    async def open(self, ml: ManagedLedgerName) -> VersionedManagedLedger:
        """The topic's ledgers, creating its key with an empty value when missing (as a broker
        does on first open); concurrent openers all end up reading the same key."""
        found = await self.get(ml)
        if found is not None:
            return found
        with contextlib.suppress(AlreadyExists):
            await self.keys.create(ml.path, b"")
            return VersionedManagedLedger(ManagedLedgerInfo(), 0)
        return await self.read(ml)

    async def get(self, ml: ManagedLedgerName) -> VersionedManagedLedger | None:
        found = await self.keys.read(ml.path)
        if found is None:
            return None
        return VersionedManagedLedger(decode_managed_ledger_info(found.value), found.version)

    async def read(self, ml: ManagedLedgerName) -> VersionedManagedLedger:
        """`NotFound` when the topic has no managed ledger."""
        found = await self.get(ml)
        if found is None:
            raise NotFound(ml.path)
        return found

    async def write(
        self, ml: ManagedLedgerName, info: ManagedLedgerInfo, expected_version: int
    ) -> VersionedManagedLedger:
        """Replace the topic's ledger list if still at `expected_version` (`BadVersion`
        otherwise, `NotFound` when the topic was deleted)."""
        version = await self.keys.put_at_version(
            ml.path, encode_managed_ledger_info(info), expected_version
        )
        return VersionedManagedLedger(info, version)

    async def delete(self, ml: ManagedLedgerName) -> None:
        """Remove the topic's key and its cursors in one transaction; `NotFound` when absent."""
        if not await self.keys.exists(ml.path):
            raise NotFound(ml.path)
        await self.keys.delete_tree(ml.path)

    async def topics(self, tenant: str, namespace: str) -> list[str]:
        """Local names of the namespace's persistent topics that have a managed ledger."""
        parent = paths.join(paths.MANAGED_LEDGERS, tenant, namespace, "persistent")
        return [unquote_plus(child) for child in await self.keys.children(parent)]

    async def cursors(self, ml: ManagedLedgerName) -> list[str]:
        """Names of the topic's cursors (decoded), sorted by their keys."""
        return [unquote_plus(child) for child in await self.keys.children(ml.path)]

    async def read_cursor(self, ml: ManagedLedgerName, cursor: str) -> VersionedCursor:
        found = await self.keys.read(ml.cursor_path(cursor))
        if found is None:
            raise NotFound(ml.cursor_path(cursor))
        return VersionedCursor(decode_cursor_info(found.value), found.version)

    async def write_cursor(
        self,
        ml: ManagedLedgerName,
        cursor: str,
        info: ManagedCursorInfo,
        expected_version: int | None,
    ) -> VersionedCursor:
        """Create the cursor (`expected_version` None: `AlreadyExists` when it exists) or
        compare-and-swap it at `expected_version`."""
        path, raw = ml.cursor_path(cursor), encode_cursor_info(info)
        if expected_version is None:
            version = await self.keys.create(path, raw)
        else:
            version = await self.keys.put_at_version(path, raw, expected_version)
        return VersionedCursor(info, version)

    async def delete_cursor(self, ml: ManagedLedgerName, cursor: str) -> None:
        await self.keys.delete(ml.cursor_path(cursor))
