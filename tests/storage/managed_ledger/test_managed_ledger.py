"""Managed ledgers on real bookies: ManagedLedgerInfo at Pulsar's key (created empty first),
rollover by Pulsar's settings with every ledger inside the namespace's strict groups, reads of
every entry across ledgers, and a reopen that closes the abandoned last ledger."""

from __future__ import annotations

import asyncio
import json

from metastore import paths
from metastore.ledger_metadata import LedgerState, decode_ledger_metadata
from metastore.managed_ledger_info import decode_managed_ledger_info
from placement import AffinityGroups
from storage.managed_ledger import (
    ManagedLedgerConfig,
    Position,
    RolloverPolicy,
    managed_ledger_name,
    managed_ledger_path,
)
from storage.managed_ledger.names import codec_encode
from tests.storage.testbed import GROUP, Cluster, engine

STRICT = AffinityGroups((GROUP,), strict=True)
EVERY_5 = RolloverPolicy(max_entries=5, min_rollover_minutes=0)


def config(rollover: RolloverPolicy = EVERY_5) -> ManagedLedgerConfig:
    return ManagedLedgerConfig(3, 2, 2, affinity=STRICT, recorded_affinity=STRICT,
                               rollover=rollover)


def test_names_follow_pulsars_persistence_encoding() -> None:
    assert codec_encode("a b/c~é*") == "a+b%2Fc%7E%C3%A9*"
    assert managed_ledger_name("t", "ns", "my topic") == "t/ns/persistent/my+topic"
    assert managed_ledger_path("t/ns/persistent/x") == "/managed-ledgers/t/ns/persistent/x"


def test_rollover_policy_is_pulsars() -> None:
    policy = RolloverPolicy(max_entries=10, max_size_mb=1, min_rollover_minutes=1,
                            max_rollover_minutes=5)
    assert not policy.is_full(9, 0, 120_000)
    assert policy.is_full(10, 0, 60_001)
    assert not policy.is_full(10, 0, 60_000)  # full, but younger than the minimum age
    assert policy.is_full(0, 1024 * 1024, 61_000)
    assert policy.is_full(0, 0, 300_000)  # too old
    assert RolloverPolicy(max_entries=3, min_rollover_minutes=0).is_full(3, 0, 0)


async def test_rollover_keeps_every_ledger_in_the_strict_group(cluster: Cluster) -> None:
    name = "tenant/ns/persistent/rolled"
    path = managed_ledger_path(name)
    async with engine(cluster) as running:
        ml = await running.factory.open(name, config())
        assert cluster.raw.get(path) is not None
        data = [f"message {i}".encode() * (i % 7 + 1) for i in range(23)]
        positions = list(await asyncio.gather(*(ml.add_entry(d) for d in data)))
        assert len(set(positions)) == 23 and positions == sorted(positions)
        assert len({p.ledger_id for p in positions}) == 5  # 5 + 5 + 5 + 5 + 3
        for position, payload in zip(positions, data, strict=True):
            assert await ml.read_entry(position) == payload
        await ml.close()

    info = decode_managed_ledger_info(cluster.raw.get(path) or b"")
    assert [i.entries for i in info.ledgers] == [5, 5, 5, 5, 3]
    assert [i.ledger_id for i in info.ledgers] == sorted({p.ledger_id for p in positions})
    assert all(i.timestamp and i.timestamp > 0 for i in info.ledgers)
    for stored in info.ledgers:
        md = decode_ledger_metadata(stored.ledger_id,
                                    cluster.raw.get(paths.ledger(stored.ledger_id)) or b"")
        assert md.state is LedgerState.CLOSED
        assert md.last_entry_id + 1 == stored.entries and md.length == stored.size
        assert set(md.ensembles[0]) <= set(cluster.ids[:3]), md.ensembles
        assert md.custom_metadata["pulsar/managed-ledger"] == name.encode()
        policy = json.loads(md.custom_metadata["EnsemblePlacementPolicyConfig"])
        assert policy["properties"]["isolationBookieGroups"] == GROUP

    # another process deletes it without opening it (no new ledger, no bookie needed)
    async with engine(cluster) as running:
        await running.factory.delete(name)
    assert cluster.raw.get(path) is None
    assert all(cluster.raw.get(paths.ledger(i.ledger_id)) is None for i in info.ledgers)


async def test_reopen_after_the_writer_vanished(cluster: Cluster) -> None:
    name = "tenant/ns/persistent/reopened"
    async with engine(cluster) as running:
        ml = await running.factory.open(name, config(RolloverPolicy(min_rollover_minutes=0)))
        data = [f"m{i}".encode() for i in range(12)]
        positions = [await ml.add_entry(d) for d in data]
        # no close: the process "dies" with its current ledger OPEN
    async with engine(cluster) as running:
        ml = await running.factory.open(name, config())
        assert [await ml.read_entry(p) for p in positions] == data
        first = positions[0].ledger_id
        assert ml.ledgers[first].entries == 12
        assert ml.current_ledger_id != first
        new = await ml.add_entry(b"after")
        assert new == Position(ml.current_ledger_id or -1, 0)
        for ledger_id in ml.ledgers:  # across the restart, still inside the strict group
            md = await running.client.read_metadata(ledger_id)
            assert set(md.ensembles[0]) <= set(cluster.ids[:3]), md.ensembles
        await ml.delete()
    assert cluster.raw.get(managed_ledger_path(name)) is None
    assert cluster.raw.get(paths.ledger(first)) is None


async def test_delete_while_open_after_another_writer_deleted_it(cluster: Cluster) -> None:
    """A managed ledger open here whose ledgers and info another writer of the store deleted
    (a broker deleting the topic) is deleted without error: the current ledger, gone, is not
    closed first, as Pulsar's `asyncDelete` does not close it."""
    name = "tenant/ns/persistent/deleted-elsewhere"
    async with engine(cluster) as running:
        ml = await running.factory.open(name, config())
        await ml.add_entry(b"one")
        current = ml.current_ledger_id
        assert current is not None
        async with engine(cluster) as other:
            await other.factory.delete(name)
        assert cluster.raw.get(paths.ledger(current)) is None
        await running.factory.delete(name)
        assert cluster.raw.get(managed_ledger_path(name)) is None
