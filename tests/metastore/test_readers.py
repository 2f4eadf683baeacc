"""Typed readers and the topology over a real etcd, used the way the storage engine and the
audit use them: no `api` import anywhere on this path (the import contracts check that)."""

from __future__ import annotations

import random

import pytest

from metastore import paths
from metastore.errors import NotFound
from metastore.readers import (
    read_all_local_policies,
    read_brokers,
    read_failure_domains,
    read_namespace_placement,
    read_registered_bookies,
)
from metastore.store import MetadataStore
from metastore.topology import TopologySnapshot, read_cluster_view
from placement import (
    Adherence,
    AffinityGroups,
    EnsembleRequest,
    PlacementConfig,
    adherence,
    new_ensemble,
)
from tests.support import RawEtcd, wait_until_async

RACKS = {f"b{i}:3181": f"/r{i % 3}" for i in range(6)}


def seed(raw: RawEtcd) -> None:
    raw.put(paths.BOOKIES_RACK_CONFIG, {
        "iso": {b: {"rack": r} for b, r in RACKS.items() if b < "b3"},
        "other": {b: {"rack": r} for b, r in RACKS.items() if b >= "b3"},
    })  # fmt: skip
    for bookie in RACKS:
        raw.put(paths.bookie_available(bookie), b"")
    raw.put(paths.bookie_readonly("ro:3181"), b"")
    raw.put(paths.namespace("t", "ns"), {"persistence": {
        "bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 2}})
    raw.put(paths.local_policies("t", "ns"), {"bookieAffinityGroup": {
        "bookkeeperAffinityGroupPrimary": "iso", "bookkeeperAffinityGroupStrict": True}})


async def test_place_and_audit_a_ledger_of_a_namespace(
    store: MetadataStore, raw_etcd: RawEtcd
) -> None:
    seed(raw_etcd)
    config = PlacementConfig()
    view = await read_cluster_view(store, config)
    inputs = await read_namespace_placement(store, "t", "ns", config)
    assert inputs.request == EnsembleRequest(3, 2, 2)
    assert inputs.affinity == AffinityGroups(("iso",), strict=True)
    placed = new_ensemble(view.topology, inputs.request, config, random.Random(1),
                          affinity=inputs.affinity)  # fmt: skip
    assert set(placed.ensemble) == {"b0:3181", "b1:3181", "b2:3181"}
    audit = adherence(view.topology, placed.ensemble, 2, 2, config, affinity=inputs.affinity)
    assert audit is Adherence.MEETS_STRICT
    outside = ("b0:3181", "b1:3181", "b3:3181")
    audit = adherence(view.topology, outside, 2, 2, config, affinity=inputs.affinity)
    assert audit is Adherence.FAIL
    with pytest.raises(NotFound):
        await read_namespace_placement(store, "t", "missing", config)


async def test_readers_of_each_document(store: MetadataStore, raw_etcd: RawEtcd) -> None:
    seed(raw_etcd)
    raw_etcd.put(paths.local_policies("t", "broken"), b"not json")
    raw_etcd.put(paths.failure_domain("c", "d1"), {"brokers": ["h1:8080"]})
    raw_etcd.put(paths.broker("h1:8080"), {"webServiceUrl": "http://h1:8080"})
    registered = await read_registered_bookies(store)
    assert registered.writable == set(RACKS) and registered.read_only == {"ro:3181"}
    assert list(await read_all_local_policies(store)) == ["t/ns"]  # the unreadable is skipped
    assert await read_failure_domains(store, "c") == {"d1": ["h1:8080"]}
    assert list(await read_brokers(store)) == ["h1:8080"]


async def test_snapshot_follows_the_watches(store: MetadataStore, raw_etcd: RawEtcd) -> None:
    seed(raw_etcd)
    snapshot = TopologySnapshot.watching(store, PlacementConfig())
    await snapshot.start()
    try:
        first = await snapshot.current()
        assert first.topology.writable == set(RACKS)
        assert await snapshot.current() is first  # no change: the same view
        raw_etcd.delete(paths.bookie_available("b5:3181"))

        async def followed() -> bool:
            return "b5:3181" not in (await snapshot.current()).topology.writable

        await wait_until_async(followed)
    finally:
        await snapshot.stop()


