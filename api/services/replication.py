"""A namespace's replication clusters (`replication_clusters` of its `Policies`), as Pulsar's
`NamespacesBase.internal{Get,Set}NamespaceReplicationClusters` read and write them.

Setting checks, in upstream's order: a non-empty list (412), no `global` (412); then for each
cluster: it exists (403 `Invalid cluster id`), its record is readable (412), none of its peer
clusters is in the list (409), and it is allowed: by the namespace's own `allowed_clusters`
when that is set, else by the tenant's `allowedClusters` (403). The namespace must exist (404).
The write is a compare-and-swap of the policies document that keeps every other field.
"""

from __future__ import annotations

from api.errors import Conflict, Forbidden, NotFound, PreconditionFailed
from api.naming import require_valid_namespace_name
from api.services.namespaces import (
    GLOBAL_CLUSTER,
    NAMESPACE_NOT_FOUND,
    NamespaceService,
)
from api.settings import Settings
from api.shapes.models import Policies
from javaformats import hash_set_order, java_to_string
from metastore.repositories import Repositories
from metastore.store import MetadataStore

EMPTY_CLUSTER_IDS = "ClusterIds should not be null or empty"
GLOBAL_NOT_ALLOWED = "Cannot specify global in the list of replication clusters"


class ReplicationService:
    def __init__(self, store: MetadataStore, settings: Settings) -> None:
        self.store = store
        self.namespaces = NamespaceService(store, settings)
        self.docs = Repositories(store)

    async def clusters(self, tenant: str, namespace: str) -> list[str]:
        return (await self.namespaces.policies(tenant, namespace)).replication_clusters

    async def set_clusters(
        self, tenant: str, namespace: str, cluster_ids: list[str] | None
    ) -> None:
        require_valid_namespace_name(tenant, namespace)
        if not cluster_ids:
            raise PreconditionFailed(EMPTY_CLUSTER_IDS)
        wanted = list(dict.fromkeys(cluster_ids))
        if GLOBAL_CLUSTER in wanted:
            raise PreconditionFailed(GLOBAL_NOT_ALLOWED)
        # Pulsar walks `Sets.newHashSet(clusterIds)`: an unknown id is refused as the walk
        # meets it, before any of the asynchronous checks (peers, namespace, allowed clusters)
        # of the ids before it reports; those then fail in the same order.
        existing = set(await self.docs.clusters.list())
        walk = hash_set_order(wanted)
        for cluster in walk:
            if cluster not in existing:
                raise Forbidden(f"Invalid cluster id: {cluster}")
        for cluster in walk:
            await self._check_peers(cluster, walk)
            await self._check_allowed(tenant, namespace, cluster)

        def change(policies: Policies | None) -> Policies:
            if policies is None:
                raise NotFound(NAMESPACE_NOT_FOUND)
            policies.replication_clusters = wanted
            return policies

        await self.docs.policies.update(tenant, namespace, mutate=change)

    async def _check_peers(self, cluster: str, wanted: list[str]) -> None:
        """`validatePeerClusterConflictAsync`: `wanted` in the HashSet's order it prints."""
        found = await self.docs.clusters.get(cluster)
        if found is None:
            raise PreconditionFailed(f"Invalid replication cluster {cluster}")
        peers = found.value.peerClusterNames or []
        conflict = [peer for peer in peers if peer in wanted]
        if conflict:
            raise Conflict(
                f"{cluster}'s peer-clusters {java_to_string(conflict)} can't be part of "
                f"replication-clusters {java_to_string(wanted)}"
            )

    async def _check_allowed(self, tenant: str, namespace: str, cluster: str) -> None:
        policies = await self.namespaces.policies(tenant, namespace)
        allowed = policies.allowed_clusters
        if allowed:
            if cluster not in allowed:
                raise Forbidden(
                    f"Cluster [{cluster}] is not in the list of allowed clusters list for "
                    f"namespace [{tenant}/{namespace}]"
                )
            return
        info = await self.namespaces.tenant_info(tenant)
        if info is None:
            raise NotFound("Tenant does not exist")
        if cluster not in info.allowedClusters:
            raise Forbidden(
                f"Cluster [{cluster}] is not in the list of allowed clusters list for tenant "
                f"[{tenant}]"
            )


__all__ = ["EMPTY_CLUSTER_IDS", "GLOBAL_NOT_ALLOWED", "ReplicationService"]
