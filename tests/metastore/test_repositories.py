"""The typed repositories over a real etcd and a real ZooKeeper: versioned get, create,
compare-and-swap update, delete, listing and guarded multi-document transactions, with the
bytes Pulsar writes at Pulsar's keys."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from metastore.cache import WatchedRange
from metastore.embedded import EmbeddedEtcd
from metastore.errors import AlreadyExists, BadVersion, ContentDeserializationError, NotFound
from metastore.models import ClusterData, LocalPolicies, Policies, TenantInfo
from metastore.repositories import READS, UNCHANGED, Mutation, Repositories
from metastore.store import MetadataStore
from metastore.zookeeper_backend import ZooKeeperBackend
from placement import AffinityGroups
from tests.support import wait_until_async
from tests.zookeeper import EmbeddedZooKeeper


@pytest.fixture(params=["etcd", "zookeeper"])
async def any_store(request: pytest.FixtureRequest) -> AsyncIterator[MetadataStore]:
    """A store on the session's etcd, then one on its ZooKeeper, wiped first."""
    if request.param == "etcd":
        request.getfixturevalue("raw_etcd").wipe()
        etcd: EmbeddedEtcd = request.getfixturevalue("etcd")
        opened = MetadataStore([etcd.endpoint], timeout=5)
    else:
        zookeeper: EmbeddedZooKeeper = request.getfixturevalue("zookeeper")
        zookeeper.wipe()
        backend = ZooKeeperBackend(zookeeper.hosts(), "/repositories", timeout=5)
        opened = MetadataStore([], timeout=5, zookeeper=backend)
    yield opened
    await opened.close()


async def test_create_get_update_delete_with_versions(any_store: MetadataStore) -> None:
    docs = Repositories(any_store)
    version = await docs.clusters.create("c1", value=ClusterData(serviceUrl="http://h:8080"))
    with pytest.raises(AlreadyExists):
        await docs.clusters.create("c1", value=ClusterData())
    found = await docs.clusters.get("c1")
    assert found is not None and found.version == version
    assert found.value.serviceUrl == "http://h:8080"
    assert found.raw == ClusterData(serviceUrl="http://h:8080").to_bytes()  # Pulsar's bytes
    assert await docs.clusters.list() == ["c1"]

    def rename(current: ClusterData | None) -> ClusterData:
        assert current is not None
        return current.model_copy(update={"serviceUrl": "http://other:8080"})

    updated = await docs.clusters.update("c1", mutate=rename)
    assert updated is not None and updated.version != version
    assert updated.value.serviceUrl == "http://other:8080"
    assert await docs.clusters.update("c1", mutate=lambda _: UNCHANGED) is not None
    with pytest.raises(BadVersion):
        await docs.clusters.delete("c1", expected_version=version)
    await docs.clusters.delete("c1", expected_version=updated.version)
    assert await docs.clusters.get("c1") is None
    with pytest.raises(NotFound):
        await docs.clusters.delete("c1")


async def test_concurrent_updates_lose_nothing(any_store: MetadataStore) -> None:
    docs = Repositories(any_store)
    await docs.tenants.create("t", value=TenantInfo(allowedClusters=["c"]))

    def adding(role: str) -> Mutation[TenantInfo]:
        def add(current: TenantInfo | None) -> TenantInfo:
            assert current is not None
            return current.model_copy(update={"adminRoles": [*current.adminRoles, role]})
        return add

    other = Repositories(any_store)  # a second service over the same store
    await asyncio.gather(*(
        (docs if i % 2 else other).tenants.update("t", mutate=adding(f"r{i}"))
        for i in range(20)
    ))  # fmt: skip
    found = await docs.tenants.get("t")
    assert found is not None and sorted(found.value.adminRoles) == sorted(
        f"r{i}" for i in range(20))  # fmt: skip


async def test_transaction_is_guarded_by_every_version_read(any_store: MetadataStore) -> None:
    docs = Repositories(any_store)
    await docs.tenants.create("t", value=TenantInfo(allowedClusters=["c"]))
    await docs.policies.create("t", "ns", value=Policies(replication_clusters=["c"]))
    owner = await docs.policies.get("t", "ns")
    assert owner is not None
    local = LocalPolicies(namespaceAntiAffinityGroup="g")
    await (docs.transaction()
           .require(docs.policies.at("t", "ns", version=owner.version),
                    docs.local_policies.at("t", "ns", version=0))
           .put(docs.local_policies, "t", "ns", value=local)
           .commit())  # fmt: skip
    written = await docs.local_policies.get("t", "ns")
    assert written is not None and written.value.namespaceAntiAffinityGroup == "g"
    with pytest.raises(BadVersion):  # the local policies exist now: "still absent" fails
        await (docs.transaction()
               .require(docs.local_policies.at("t", "ns", version=0))
               .put(docs.local_policies, "t", "ns", value=LocalPolicies())
               .commit())  # fmt: skip
    assert (await docs.policies.of_tenant("t")).keys() == {"ns"}
    await (docs.transaction()
           .require(docs.policies.at("t", "ns", version=owner.version))
           .delete_tree(docs.policies, "t", "ns")
           .delete_tree(docs.local_policies, "t", "ns")
           .commit())  # fmt: skip
    assert await docs.policies.get("t", "ns") is None
    assert await docs.local_policies.get("t", "ns") is None


async def test_placement_reads_tolerate_other_tools_but_not_a_broken_document(
    any_store: MetadataStore,
) -> None:
    docs = Repositories(any_store)
    local_path = docs.local_policies.path("t", "ns")
    await any_store.put(local_path, b'{"bookieAffinityGroup":{"bookkeeperAffinityGroupPrimary":"a",'
                                b'"bookkeeperAffinityGroupSecondary":7},'
                                b'"namespaceAntiAffinityGroup":["x"]}')  # fmt: skip
    read = await docs.local_policies.read_placement("t", "ns")
    assert read is not None and read.bookie_affinity == AffinityGroups(("a",))
    assert read.anti_affinity_group is None
    await any_store.put(local_path, b"[1]")
    with pytest.raises(ContentDeserializationError, match="t/ns"):
        await docs.local_policies.read_placement("t", "ns")
    assert await docs.local_policies.all_for_placement() == {}  # skipped in the scan


async def test_cached_reads_follow_the_watch(any_store: MetadataStore) -> None:
    docs = Repositories(any_store)
    await docs.tenants.create("t", value=TenantInfo(allowedClusters=["c"]))
    watched = WatchedRange(any_store, "/admin/policies", prefix=True)
    await watched.start()
    try:
        await docs.policies.create("t", "ns", value=Policies(replication_clusters=["c"]))
        store_reads = READS.store.get("policies", 0)
        found = await docs.policies.get_cached("t", "ns")  # written by this process: at once
        assert found is not None and found.value.replication_clusters == ["c"]
        assert READS.store.get("policies", 0) == store_reads

        def change(current: Policies | None) -> Policies:
            assert current is not None
            return current.model_copy(update={"replication_clusters": ["d"]})

        await Repositories(any_store).policies.update("t", "ns", mutate=change)

        async def seen() -> bool:
            now = await docs.policies.get_cached("t", "ns")
            return now is not None and now.value.replication_clusters == ["d"]

        await wait_until_async(seen)
        assert READS.store.get("policies", 0) == store_reads
    finally:
        await watched.stop()

