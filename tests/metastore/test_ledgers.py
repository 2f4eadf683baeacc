"""Ledger metadata and managed-ledger records in a real etcd, at Pulsar's keys with Pulsar's
version semantics (etcd version - 1), compare-and-swap and bounded listing; and the
/ledgers root as a formatted cluster has it."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable

import pytest

from metastore.embedded import EmbeddedEtcd
from metastore.errors import AlreadyExists, BadVersion, MetadataFormatError, NotFound
from metastore.ledger_layout import LedgerLayout, read_layout, set_up_ledgers_root
from metastore.ledger_metadata import LedgerMetadata, LedgerState, encode_ledger_metadata
from metastore.ledgers import LedgerMetadataStore
from metastore.managed_ledger_info import LedgerInfo, ManagedLedgerInfo
from metastore.managed_ledgers import ManagedLedgerName, ManagedLedgerStore
from metastore.proto.managed_ledger_formats_pb2 import ManagedCursorInfo
from metastore.versioned_keys import VersionedKeys
from tests.support import RawEtcd


@pytest.fixture
async def keys(etcd: EmbeddedEtcd, raw_etcd: RawEtcd) -> AsyncIterator[VersionedKeys]:
    raw_etcd.wipe()
    keys = VersionedKeys([etcd.endpoint], timeout=5)
    yield keys
    await keys.close()


def metadata(ledger_id: int, **changes: object) -> LedgerMetadata:
    base = LedgerMetadata(
        ledger_id=ledger_id,
        ensemble_size=2,
        write_quorum_size=2,
        ack_quorum_size=2,
        ensembles={0: ("127.0.0.1:3181", "127.0.0.2:3181")},
        custom_metadata={"application": b"pulsar"},
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


async def test_create_read_cas_delete(keys: VersionedKeys, raw_etcd: RawEtcd) -> None:
    ledgers = LedgerMetadataStore(keys)
    created = await ledgers.create(metadata(1))
    assert created.version == 0
    assert raw_etcd.get("/ledgers/00/0000/L0001") == encode_ledger_metadata(metadata(1))
    with pytest.raises(AlreadyExists):
        await ledgers.create(metadata(1, ack_quorum_size=1))

    read = await ledgers.read(1)
    assert read == created
    closed = metadata(1, state=LedgerState.CLOSED, last_entry_id=9, length=90)
    written = await ledgers.write(closed, read.version)
    assert written.version == 1
    with pytest.raises(BadVersion):  # the version it was read at is gone
        await ledgers.write(metadata(1), read.version)
    assert (await ledgers.read(1)).metadata == closed

    with pytest.raises(BadVersion):
        await ledgers.delete(1, expected_version=0)
    await ledgers.delete(1, expected_version=1)
    assert await ledgers.get(1) is None
    with pytest.raises(NotFound):
        await ledgers.read(1)
    with pytest.raises(NotFound):
        await ledgers.write(closed, 1)
    with pytest.raises(NotFound):
        await ledgers.delete(1)


async def test_update_loop_retries_on_conflict(keys: VersionedKeys) -> None:
    ledgers = LedgerMetadataStore(keys)
    await ledgers.create(metadata(5))

    def add_ensemble(first: int, bookie: str) -> Callable[[LedgerMetadata], LedgerMetadata | None]:
        def change(current: LedgerMetadata) -> LedgerMetadata | None:
            if first in current.ensembles:
                return None
            ensembles = {**current.ensembles, first: ("127.0.0.1:3181", bookie)}
            return dataclasses.replace(current, ensembles=ensembles)

        return change

    results = await asyncio.gather(
        *(ledgers.update(5, add_ensemble(10 * i, f"10.0.0.{i}:3181")) for i in range(1, 9))
    )
    final = await ledgers.read(5)
    assert sorted(final.metadata.ensembles) == [0, 10, 20, 30, 40, 50, 60, 70, 80]
    assert final.version == 8
    assert max(r.version for r in results) == 8
    # nothing to do any more: the current state, no write
    assert await ledgers.update(5, add_ensemble(10, "x:1")) == final


async def test_listing_pages_in_id_order(keys: VersionedKeys, raw_etcd: RawEtcd) -> None:
    ledgers = LedgerMetadataStore(keys)
    ids = [1, 2, 9999, 10000, 123456789, 2**31 - 2, 2**31 - 1, (1 << 32) | 1, 2**62]
    for ledger_id in reversed(ids):
        await ledgers.create(metadata(ledger_id))
    await set_up_ledgers_root(keys)  # other children of /ledgers are skipped
    raw_etcd.put("/ledgers/00/0000", b"")  # a parent key left by a ZooKeeper migration
    found = [i async for i in ledgers.ledger_ids(page_size=2)]
    assert found == ids
    full = [v async for v in ledgers.ledgers(page_size=3)]
    assert [v.metadata.ledger_id for v in full] == ids
    assert all(v.version == 0 and v.metadata == metadata(v.metadata.ledger_id) for v in full)


async def test_a_corrupt_value_names_its_ledger(keys: VersionedKeys, raw_etcd: RawEtcd) -> None:
    raw_etcd.put("/ledgers/00/0000/L0003", b"not metadata")
    with pytest.raises(MetadataFormatError, match="ledger metadata"):
        await LedgerMetadataStore(keys).read(3)


async def test_ledgers_root_as_a_formatted_cluster(keys: VersionedKeys, raw_etcd: RawEtcd) -> None:
    instance_id = await set_up_ledgers_root(keys)
    assert raw_etcd.get("/ledgers") == b""
    assert raw_etcd.get("/ledgers/available") == b""
    assert raw_etcd.get("/ledgers/available/readonly") == b""
    assert raw_etcd.get("/ledgers/INSTANCEID") == instance_id.encode()
    assert len(instance_id) == 36 and instance_id.count("-") == 4
    assert raw_etcd.get("/ledgers/LAYOUT") == (
        b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1"
    )
    assert await read_layout(keys) == LedgerLayout()
    # twice, and from another process's point of view: the first instance id stays
    assert await set_up_ledgers_root(keys) == instance_id


async def test_managed_ledger_lifecycle(keys: VersionedKeys, raw_etcd: RawEtcd) -> None:
    topics = ManagedLedgerStore(keys)
    ml = ManagedLedgerName("public", "default", "my topic")
    assert ml.name == "public/default/persistent/my+topic"
    with pytest.raises(NotFound):
        await topics.read(ml)

    opened = await asyncio.gather(*(topics.open(ml) for _ in range(5)))
    assert all(o.info == ManagedLedgerInfo() and o.version == 0 for o in opened)
    assert raw_etcd.get("/managed-ledgers/public/default/persistent/my+topic") == b""

    info = ManagedLedgerInfo(ledgers=(LedgerInfo(7, timestamp=0),))
    written = await topics.write(ml, info, 0)
    assert written.version == 1
    with pytest.raises(BadVersion):
        await topics.write(ml, ManagedLedgerInfo(), 0)
    assert (await topics.open(ml)).info == info

    cursor = ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=7, markDeleteEntryId=-1)
    created = await topics.write_cursor(ml, "sub/1", cursor, None)
    assert created.version == 0
    assert raw_etcd.get("/managed-ledgers/public/default/persistent/my+topic/sub%2F1") is not None
    with pytest.raises(AlreadyExists):
        await topics.write_cursor(ml, "sub/1", cursor, None)
    moved = ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=7, markDeleteEntryId=4)
    assert (await topics.write_cursor(ml, "sub/1", moved, 0)).version == 1
    assert (await topics.read_cursor(ml, "sub/1")).info == moved
    assert await topics.cursors(ml) == ["sub/1"]
    assert await topics.topics("public", "default") == ["my topic"]

    await topics.delete(ml)
    assert raw_etcd.keys("/managed-ledgers") == []
    with pytest.raises(NotFound):
        await topics.delete(ml)
