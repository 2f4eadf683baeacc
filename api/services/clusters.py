"""Clusters (`/admin/clusters/{c}`) and their failure domains (`.../failureDomain/{d}`).

Rules, as Pulsar's ClustersBase applies them:
- a cluster name matches NamedEntity's `^[-=:.\\w]*$`; `global` exists but is never listed;
- URLs in ClusterData, when present, must parse and carry the expected scheme;
- a cluster is deleted only when no v1 namespace (`tenant/cluster/ns`) lives under it and its
  namespace isolation policies are empty (v2 namespaces replicating to it do not hold it, as
  in Pulsar 4.0); the deletion takes its failure domains and isolation record with it, in one
  transaction;
- a broker belongs to at most one failure domain of a cluster. A domain write is one etcd
  transaction guarded by the revision of every domain of the cluster, so two concurrent writers
  cannot put one broker in two domains.
"""

from __future__ import annotations

import re
from typing import Any

from api.errors import Conflict, InvalidInput, NotFound, PreconditionFailed
from api.naming import is_valid_name, require_free_name
from api.shapes.models import ClusterData, FailureDomain
from javaformats import hash_map_order, hash_set_order, java_to_string
from metastore import errors as store_errors
from metastore.codec import load_json
from metastore.models import ClusterData as StoredClusterData
from metastore.repositories import Repositories, Stored, newest_version
from metastore.store import MetadataStore, retry_on_conflict

GLOBAL_CLUSTER = "global"

CLUSTER_NOT_FOUND = "Cluster does not exist"
CLUSTER_EXISTS = "Cluster already exists"
CLUSTER_NAME_INVALID = "Cluster name is not valid"
CLUSTER_DATA_REQUIRED = "cluster data is required"
CLUSTER_NOT_EMPTY = "Cluster not empty"

# (field, accepted schemes, reason): ClusterDataImpl.checkPropertiesIfPresent.
URL_RULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("serviceUrl", ("http",), "Illegal service url, example: http://pulsar.example.com:8080"),
    (
        "serviceUrlTls",
        ("https",),
        "Illegal service tls url, example: https://pulsar.example.com:8443",
    ),
    (
        "brokerServiceUrl",
        ("pulsar",),
        "Illegal broker service url, example: pulsar://pulsar.example.com:6650",
    ),
    (
        "brokerServiceUrlTls",
        ("pulsar+ssl",),
        "Illegal broker service tls url, example: pulsar+ssl://pulsar.example.com:6651",
    ),
    (
        "proxyServiceUrl",
        ("pulsar", "pulsar+ssl"),
        "Illegal proxy service url, example: pulsar+ssl://ats-proxy.example.com:4443 "
        "or pulsar://ats-proxy.example.com:4080",
    ),
)

_URI_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(.+)$", re.DOTALL)
_URI_ILLEGAL = re.compile(r'[\x00-\x20\x7f"<>\\^`{|}]|%(?![0-9A-Fa-f]{2})')


def cluster_missing_reason(cluster: str) -> str:
    return f"Cluster {cluster} does not exist."


async def require_cluster(
    store: MetadataStore, cluster: str, *, status_404: bool = False
) -> Stored[StoredClusterData]:
    """The cluster's record; Pulsar's `validateClusterExist` fails with 412 (or 404)."""
    found = await Repositories(store).clusters.get(cluster)
    if found is None:
        reason = cluster_missing_reason(cluster)
        raise NotFound(reason) if status_404 else PreconditionFailed(reason)
    return found


def uri_scheme(url: str) -> str | None:
    """The scheme of `url` as java.net.URI parses it; None when it has none or does not parse."""
    if _URI_ILLEGAL.search(url):
        return None
    match = _URI_SCHEME.match(url)
    if match is None:
        return None
    rest = match.group(2)
    if rest.startswith("//") and rest[2:3] in ("", "?", "#"):
        return None  # "Expected authority"
    return match.group(1)


def check_cluster_name(cluster: str) -> None:
    if not is_valid_name(cluster):
        raise PreconditionFailed(CLUSTER_NAME_INVALID)


def check_urls(data: ClusterData) -> None:
    for field, schemes, reason in URL_RULES:
        url = getattr(data, field)
        if url is not None and uri_scheme(url) not in schemes:
            raise InvalidInput(reason)


def unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def under_cluster(name: str, cluster: str) -> bool:
    """A document `tenant/cluster/...` below `/admin/policies`: a v1 namespace of `cluster`,
    what `ClusterResources.isClusterUsedAsync` looks for (the children of
    `/admin/policies/{tenant}/{cluster}`). A v2 namespace replicating to the cluster does not
    hold it."""
    parts = name.split("/")
    return len(parts) >= 3 and parts[1] == cluster


class ClusterService:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.docs = Repositories(store)

    # -- clusters ---------------------------------------------------------------------------

    async def list_clusters(self) -> list[str]:
        """`ClustersBase.getClusters`: the children of `/admin/clusters` but `global`, collected
        into a `HashSet` (`Collectors.toSet()`), so in its order."""
        return hash_set_order(c for c in await self.docs.clusters.list() if c != GLOBAL_CLUSTER)

    async def get_cluster(self, cluster: str) -> ClusterData:
        found = await self.docs.clusters.get(cluster)
        if found is None:
            raise NotFound(CLUSTER_NOT_FOUND)
        return found.value

    async def create_cluster(self, cluster: str, data: ClusterData | None) -> None:
        check_cluster_name(cluster)
        if data is None:
            raise InvalidInput(CLUSTER_DATA_REQUIRED)
        check_urls(data)
        try:
            await self.docs.clusters.create(cluster, value=data)
        except store_errors.AlreadyExists as exc:
            raise Conflict(CLUSTER_EXISTS) from exc

    async def update_cluster(self, cluster: str, data: ClusterData | None) -> None:
        if data is None:
            raise InvalidInput(CLUSTER_DATA_REQUIRED)
        check_urls(data)

        def replace(current: ClusterData | None) -> ClusterData:
            if current is None:
                raise NotFound(CLUSTER_NOT_FOUND)
            return data

        await self.docs.clusters.update(cluster, mutate=replace)

    async def peer_clusters(self, cluster: str) -> list[str] | None:
        """`ClustersBase.getPeerCluster`: the cluster's `peerClusterNames` (None when unset)."""
        found = await self.docs.clusters.get(cluster)
        if found is None:
            raise NotFound(CLUSTER_NOT_FOUND)
        return found.value.peerClusterNames

    async def set_peer_clusters(self, cluster: str, peers: list[str] | None) -> None:
        """`ClustersBase.setPeerClusterNames`: each peer must exist and must not be the
        cluster itself (ignoring case), checked in the list's order; then the cluster's data
        takes the peers (None clears them), the rest unchanged."""
        for peer in peers or []:
            if peer.lower() == cluster.lower():
                raise PreconditionFailed(f"{cluster} itself can't be part of peer-list")
            if await self.docs.clusters.get(peer) is None:
                raise PreconditionFailed(f"Peer cluster {peer} does not exist")

        def with_peers(current: ClusterData | None) -> ClusterData:
            if current is None:
                raise NotFound(CLUSTER_NOT_FOUND)
            return current.model_copy(update={"peerClusterNames": peers})

        await self.docs.clusters.update(cluster, mutate=with_peers)

    async def delete_cluster(self, cluster: str) -> None:
        await retry_on_conflict(lambda: self._delete_cluster_once(cluster))

    async def _delete_cluster_once(self, cluster: str) -> None:
        docs = self.docs
        found = await docs.clusters.get(cluster)
        if found is None:
            raise NotFound(CLUSTER_NOT_FOUND)
        namespaces = await docs.tenants.everything()
        if any(under_cluster(name, cluster) for name in namespaces):
            raise PreconditionFailed(CLUSTER_NOT_EMPTY)
        isolation = await docs.isolation.get(cluster)
        if isolation is not None and _non_empty_json(isolation):
            raise PreconditionFailed(CLUSTER_NOT_EMPTY)
        await (
            docs.transaction()
            .require(
                docs.clusters.at(cluster, version=found.version),
                docs.tenants.every_namespace(since=newest_version(namespaces)),
                docs.isolation.at(cluster, version=0 if isolation is None else isolation.version),
            )
            .delete_tree(docs.clusters, cluster)
            .commit()
        )

    async def require_cluster(
        self, cluster: str, *, status_404: bool = False
    ) -> Stored[StoredClusterData]:
        return await require_cluster(self.store, cluster, status_404=status_404)

    # -- failure domains --------------------------------------------------------------------

    async def failure_domains(self, cluster: str) -> dict[str, FailureDomain]:
        entries = await self.docs.failure_domains.entries(cluster)
        decoded = {name: found.value_or(None) for name, found in entries.items()}
        # `ClustersBase.getFailureDomains` puts each domain it reads into a `HashMap`
        return hash_map_order((name, domain) for name, domain in decoded.items()
                              if domain is not None)

    async def get_failure_domain(self, cluster: str, domain: str) -> FailureDomain:
        await self.require_cluster(cluster)
        found = await self.docs.failure_domains.get(cluster, domain)
        if found is None:
            raise NotFound(f"Domain {domain} for cluster {cluster} does not exist")
        return found.value

    async def set_failure_domain(self, cluster: str, domain: str, data: FailureDomain) -> None:
        require_free_name("Failure domain name", domain)
        brokers = None if data.brokers is None else unique(data.brokers)
        document = FailureDomain(brokers=brokers)
        await retry_on_conflict(lambda: self._set_failure_domain_once(cluster, domain, document))

    async def _set_failure_domain_once(
        self, cluster: str, domain: str, document: FailureDomain
    ) -> None:
        found = await self.require_cluster(cluster)
        domains = self.docs.failure_domains
        values = await domains.entries(cluster)
        wanted = set(document.brokers or [])
        for name, other in values.items():
            existing = other.value_or(None)
            if name == domain or existing is None:
                continue
            duplicates = [b for b in existing.brokers or [] if b in wanted]
            if duplicates:
                raise Conflict(f"{java_to_string(duplicates)} already exists in {name}")
        await (
            self.docs.transaction()
            .require(self.docs.clusters.at(cluster, version=found.version),
                     domains.untouched_below(cluster, since=newest_version(values)))
            .put(domains, cluster, domain, value=document)
            .commit()
        )  # fmt: skip

    async def delete_failure_domain(self, cluster: str, domain: str) -> None:
        await self.require_cluster(cluster)
        try:
            await self.docs.failure_domains.delete(cluster, domain)
        except store_errors.NotFound as exc:
            raise NotFound(f"Domain-name {domain} or cluster {cluster} does not exist") from exc


def _non_empty_json(stored: Stored[Any]) -> bool:
    try:
        return bool(load_json(stored.raw))
    except ValueError:
        return True
