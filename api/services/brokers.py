"""Brokers as they register under `/loadbalance/brokers/{host:port}` (on a session lease)."""

from __future__ import annotations

from api.errors import NotFound, PreconditionFailed
from api.settings import Settings
from metastore import paths
from metastore.store import MetadataStore


async def registered_brokers(store: MetadataStore) -> list[str]:
    return await store.children(paths.BROKERS)


async def active_brokers(store: MetadataStore, settings: Settings, cluster: str) -> list[str]:
    """Pulsar answers for its own cluster only; another existing cluster is a redirect there
    (307), which a single-cluster control plane reports as 412."""
    if not await store.exists(paths.cluster(cluster)) and cluster != settings.clusterName:
        raise NotFound("Cluster does not exist")
    if cluster != settings.clusterName:
        raise PreconditionFailed(
            f"Cluster {cluster} is not the local cluster {settings.clusterName}"
        )
    return await registered_brokers(store)
