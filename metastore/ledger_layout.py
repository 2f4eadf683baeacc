"""The BookKeeper cluster's root keys, written once when the metadata is first set up.

What `pulsar initialize-cluster-metadata` leaves on etcd (it formats BookKeeper through
Pulsar's `metadata-store:` driver when `/ledgers` does not exist yet):

- `/ledgers`, `/ledgers/available`, `/ledgers/available/readonly`: empty values
  (`PulsarRegistrationManager.prepareFormat`);
- `/ledgers/INSTANCEID`: a random UUID as text (`PulsarRegistrationManager.format`).

`/ledgers/LAYOUT`: Pulsar's driver never writes one (its ledger-manager factory's `format` is
a no-op, and it reads no layout to pick its manager), so a real Pulsar-on-etcd cluster has no
such key and readers here must not need it. We write it anyway, create-if-absent, with the
text BookKeeper's own `LedgerLayout` gives the layout the keys actually follow (the hybrid
hierarchical one, manager version 1): layout format version `2`, a newline, then
`org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1` (factory class, colon,
manager version).
A BookKeeper tool pointed at the same keys then finds the right manager; Pulsar ignores it.

Every write is create-if-absent, so setting up twice, or concurrently from two processes,
keeps the first instance id.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass

from metastore import paths
from metastore.errors import AlreadyExists, MetadataFormatError
from metastore.versioned_keys import VersionedKeys

LAYOUT_FORMAT_VERSION = 2
HIERARCHICAL_FACTORY = "org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory"
HIERARCHICAL_MANAGER_VERSION = 1


@dataclass(frozen=True)
class LedgerLayout:
    """BookKeeper's `LedgerLayout`: which ledger manager the keys under /ledgers follow."""

    manager_factory_class: str = HIERARCHICAL_FACTORY
    manager_version: int = HIERARCHICAL_MANAGER_VERSION
    layout_format_version: int = LAYOUT_FORMAT_VERSION

    def encode(self) -> bytes:
        return (
            f"{self.layout_format_version}\n{self.manager_factory_class}:{self.manager_version}"
        ).encode()

    @staticmethod
    def decode(raw: bytes) -> LedgerLayout:
        lines = raw.decode(errors="replace").split("\n")
        try:
            version = int(lines[0])
            factory, _, manager_version = lines[1].rpartition(":")
            return LedgerLayout(factory, int(manager_version), version)
        except (IndexError, ValueError) as exc:
            raise MetadataFormatError("ledger layout", repr(raw[:80])) from exc


async def set_up_ledgers_root(keys: VersionedKeys, layout: LedgerLayout | None = None) -> str:
    """Create what a formatted BookKeeper cluster has under /ledgers, where absent; returns
    the cluster's instance id (the existing one when already set up)."""
    for path in (paths.LEDGERS, paths.BOOKIES_AVAILABLE, paths.BOOKIES_READONLY):
        with contextlib.suppress(AlreadyExists):
            await keys.create(path, b"")
    with contextlib.suppress(AlreadyExists):
        await keys.create(paths.LEDGERS_LAYOUT, (layout or LedgerLayout()).encode())
    with contextlib.suppress(AlreadyExists):
        await keys.create(paths.LEDGERS_INSTANCE_ID, str(uuid.uuid4()).encode())
    instance_id = await read_instance_id(keys)
    if instance_id is None:  # deleted between our create and read
        raise MetadataFormatError("instance id", f"{paths.LEDGERS_INSTANCE_ID} vanished")
    return instance_id


async def read_instance_id(keys: VersionedKeys) -> str | None:
    found = await keys.read(paths.LEDGERS_INSTANCE_ID)
    return None if found is None else found.value.decode()


async def read_layout(keys: VersionedKeys) -> LedgerLayout | None:
    found = await keys.read(paths.LEDGERS_LAYOUT)
    return None if found is None else LedgerLayout.decode(found.value)
