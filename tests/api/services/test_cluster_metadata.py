"""First-start cluster metadata against a real etcd: what `pulsar standalone` creates, created
only when absent, never overwritten, and race-free when two servers start at once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from api.services.cluster_metadata import initialize_cluster_metadata
from api.settings import Settings
from metastore.embedded import EmbeddedEtcd
from metastore.store import MetadataStore
from tests.support import RawEtcd

SETTINGS = Settings(
    clusterName="standalone",
    metadataStoreUrl="unused",
    webServicePort=8080,
    defaultNumberOfNamespaceBundles=4,
    superUserRoles=("admin",),
)
CLUSTER = {
    "serviceUrl": "http://localhost:8080",
    "brokerServiceUrl": "pulsar://localhost:6650",
    "brokerClientTlsEnabled": False,
    "tlsAllowInsecureConnection": False,
    "brokerClientTlsEnabledWithKeyStore": False,
    "brokerClientTlsTrustStoreType": "JKS",
    "brokerClientTlsKeyStoreType": "JKS",
    "brokerClientSslFactoryPlugin": "org.apache.pulsar.common.util.DefaultPulsarSslFactory",
}  # ClusterData.builder()...build(), as PulsarClusterMetadataSetup builds it
TENANT = {"adminRoles": ["admin"], "allowedClusters": ["standalone"]}


@pytest.fixture
async def stores(etcd: EmbeddedEtcd, raw_etcd: RawEtcd) -> AsyncIterator[list[MetadataStore]]:
    raw_etcd.wipe()
    opened = [MetadataStore([etcd.endpoint], timeout=5) for _ in range(2)]
    yield opened
    for store in opened:
        await store.close()


async def test_creates_what_pulsar_standalone_creates(
    stores: list[MetadataStore], raw_etcd: RawEtcd
) -> None:
    done = await initialize_cluster_metadata(stores[0], SETTINGS)
    assert done.created == (
        "/admin/clusters/standalone",
        "/admin/policies/public",
        "/admin/policies/public/default",
        "/admin/policies/pulsar",
        "/admin/policies/pulsar/system",
    )
    assert raw_etcd.get_json("/admin/clusters/standalone") == CLUSTER
    assert raw_etcd.get_json("/admin/policies/public") == TENANT
    assert raw_etcd.get_json("/admin/policies/pulsar") == TENANT
    for name in ("public/default", "pulsar/system"):
        policies = raw_etcd.get_json(f"/admin/policies/{name}")
        assert policies["replication_clusters"] == ["standalone"]
        assert policies["bundles"]["numBundles"] == 4
    assert raw_etcd.get("/admin/local-policies/public/default") is None
    # The BookKeeper root, as `pulsar initialize-cluster-metadata` formats it.
    assert raw_etcd.get("/ledgers/LAYOUT") == (
        b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1"
    )
    instance_id = raw_etcd.get("/ledgers/INSTANCEID")
    assert instance_id is not None
    assert str(uuid.UUID(instance_id.decode())) == done.ledgers_instance_id
    for path in ("/ledgers", "/ledgers/available", "/ledgers/available/readonly"):
        assert raw_etcd.get(path) == b""
    # A second start changes nothing.
    again = await initialize_cluster_metadata(stores[0], SETTINGS)
    assert again.created == () and again.ledgers_instance_id == done.ledgers_instance_id


async def test_never_overwrites_and_skips_a_namespace_its_tenant_does_not_allow(
    stores: list[MetadataStore], raw_etcd: RawEtcd
) -> None:
    raw_etcd.put("/admin/clusters/standalone", {"serviceUrl": "http://elsewhere:80"})
    raw_etcd.put("/admin/policies/public", {"adminRoles": [], "allowedClusters": ["other"]})
    done = await initialize_cluster_metadata(stores[0], SETTINGS)
    assert raw_etcd.get_json("/admin/clusters/standalone") == {"serviceUrl": "http://elsewhere:80"}
    assert raw_etcd.get_json("/admin/policies/public")["allowedClusters"] == ["other"]
    assert raw_etcd.get("/admin/policies/public/default") is None
    assert done.created == ("/admin/policies/pulsar", "/admin/policies/pulsar/system")


async def test_two_servers_starting_at_once_create_each_document_once(
    stores: list[MetadataStore], raw_etcd: RawEtcd
) -> None:
    first, second = await asyncio.gather(
        *(initialize_cluster_metadata(store, SETTINGS) for store in stores)
    )
    assert first.ledgers_instance_id == second.ledgers_instance_id is not None
    created = sorted(first.created + second.created)
    assert created == sorted(set(created)) and len(created) == 5
    assert raw_etcd.get_json("/admin/clusters/standalone") == CLUSTER
    assert sorted(raw_etcd.keys("/admin/")) == [
        "/admin/clusters/standalone",
        "/admin/policies/public",
        "/admin/policies/public/default",
        "/admin/policies/pulsar",
        "/admin/policies/pulsar/system",
    ]
