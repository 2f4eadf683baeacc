"""The ledger client against real bookie processes and a real etcd: placement-driven create,
quorum adds acknowledged in order, close by CAS, verified reads with replica fallback, the
metadata read back through the V3 codec (failures and recovery: test_recovery.py)."""

from __future__ import annotations

import asyncio
import json

import pytest

from metastore import paths
from metastore.ledger_metadata import LedgerState, decode_ledger_metadata
from placement import AffinityGroups, NotEnoughBookies
from storage.ledger import EntryTooLarge, LedgerSpec, NoSuchEntry, NoSuchLedger
from storage.ledger.handle import ADD_FRAME_OVERHEAD
from storage.ledger.metadata import (
    ISOLATION_POLICY_CLASS,
    PLACEMENT_POLICY_CONFIG,
    managed_ledger_custom_metadata,
    parse_placement_policy_config,
)
from tests.storage.testbed import GROUP, Cluster, ledger_client

STRICT = AffinityGroups((GROUP,), strict=True)


def spec(e: int, w: int, a: int, groups: AffinityGroups | None = STRICT,
         name: str = "t/ns/persistent/topic") -> LedgerSpec:
    return LedgerSpec(e, w, a, managed_ledger_custom_metadata(name, groups), groups)


def payloads(count: int, seed: int) -> list[bytes]:
    rng = __import__("random").Random(seed)
    return [rng.randbytes(rng.randint(0, 2048)) for _ in range(count)]


async def test_adds_are_acknowledged_in_order_and_read_back_byte_for_byte(
    cluster: Cluster,
) -> None:
    async with ledger_client(cluster) as client:
        handle = await client.create(spec(3, 2, 2))
        data = payloads(60, seed=1)
        futures = [handle.add_nowait(p) for p in data]
        acked: list[int] = []
        for future in futures:
            future.add_done_callback(lambda f: acked.append(f.result()))
        ids = await asyncio.gather(*futures)
        assert ids == list(range(60))
        assert acked == list(range(60))  # completions happened strictly in order
        assert handle.last_add_confirmed == 59
        for entry_id, payload in enumerate(data):
            assert (await handle.read(entry_id)).payload == payload
        closed = await handle.close()
        assert closed.state is LedgerState.CLOSED
        assert (closed.last_entry_id, closed.length) == (59, sum(map(len, data)))

        reader = await client.open(handle.ledger_id)
        assert [(await reader.read(i)).payload for i in range(60)] == data
        with pytest.raises(NoSuchEntry):
            await reader.read(60)
        with pytest.raises(NoSuchEntry):
            await reader.read(-1)


async def test_metadata_is_v3_at_pulsars_key_with_the_policy_recorded(cluster: Cluster) -> None:
    async with ledger_client(cluster) as client:
        handle = await client.create(spec(2, 2, 2, name="tn/ns/persistent/my%20topic"))
        await handle.add(b"x")
        await handle.close()
    raw = cluster.raw.get(paths.ledger(handle.ledger_id))
    assert raw is not None and raw.startswith(b"BookieMetadataFormatVersion\t3\n")
    md = decode_ledger_metadata(handle.ledger_id, raw)
    assert md.state is LedgerState.CLOSED and md.last_entry_id == 0 and md.length == 1
    assert (md.ensemble_size, md.write_quorum_size, md.ack_quorum_size) == (2, 2, 2)
    custom = md.custom_metadata
    assert custom["application"] == b"pulsar"
    assert custom["component"] == b"managed-ledger"
    assert custom["pulsar/managed-ledger"] == b"tn/ns/persistent/my%20topic"
    policy = json.loads(custom[PLACEMENT_POLICY_CONFIG])
    assert policy == {
        "policyClass": ISOLATION_POLICY_CLASS,
        "properties": {"isolationBookieGroups": GROUP, "secondaryIsolationBookieGroups": "",
                       "bookkeeperAffinityGroupStrict": "true"},
    }
    assert parse_placement_policy_config(custom[PLACEMENT_POLICY_CONFIG]) == STRICT
    assert set(md.ensembles[0]) <= set(cluster.ids[:3])


async def test_strict_groups_place_every_ledger_inside_them(cluster: Cluster) -> None:
    async with ledger_client(cluster) as client:
        for _ in range(8):
            placed = await client.place(spec(3, 3, 2))
            assert set(placed.ensemble) == set(cluster.ids[:3])
        with pytest.raises(NotEnoughBookies):  # 3 bookies in the group, never the 4th
            await client.create(spec(4, 2, 2))
        other = await client.place(spec(1, 1, 1, AffinityGroups(("other",), strict=True)))
        assert other.ensemble == (cluster.ids[3],)


async def test_unknown_ledger(cluster: Cluster) -> None:
    async with ledger_client(cluster) as client:
        with pytest.raises(NoSuchLedger):
            await client.open(987_654)


async def test_an_entry_over_the_frame_limit_is_refused_alone_before_it_is_sent(
    cluster: Cluster,
) -> None:
    async with ledger_client(cluster) as client:
        handle = await client.create(spec(3, 2, 2))
        largest = client.bookies.max_frame - ADD_FRAME_OVERHEAD
        with pytest.raises(EntryTooLarge) as refused:
            await handle.add(b"x" * (largest + 1))
        assert refused.value.limit == largest and "nettyMaxFrameSizeBytes" in str(refused.value)
        # the handle and its connections go on: the next entry takes id 0, and the largest
        # entry the limit allows is one frame the bookies accept
        assert await handle.add(b"small") == 0
        assert await handle.add(b"y" * largest) == 1
        assert not handle.is_broken and handle.ensemble_changes == 0
        assert (await handle.read(1)).payload == b"y" * largest
        await handle.close()
