"""Clusters (`/admin/clusters/{c}`) and their failure domains (`.../failureDomain/{d}`).

Rules, as Pulsar's ClustersBase applies them:
- a cluster name matches NamedEntity's `^[-=:.\\w]*$`; `global` exists but is never listed;
- URLs in ClusterData, when present, must parse and carry the expected scheme;
- a cluster is deleted only when no namespace replicates to it and its namespace isolation
  policies are empty; the deletion takes its failure domains and isolation record with it,
  in one etcd transaction;
- a broker belongs to at most one failure domain of a cluster. A domain write is one etcd
  transaction guarded by the revision of every domain of the cluster, so two concurrent writers
  cannot put one broker in two domains.
"""

from __future__ import annotations

import re
from typing import Any

from api.errors import Conflict, InvalidInput, NotFound, PreconditionFailed
from api.services.naming import is_valid_name, require_free_name
from api.shapes.models import ClusterData, FailureDomain
from javaformats import java_to_string
from metastore import errors as store_errors
from metastore import paths
from metastore.codec import load_json
from metastore.readers import read_failure_domain_entries
from metastore.store import Guard, MetadataStore, Versioned, retry_on_conflict

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
) -> Versioned:
    """The cluster's record; Pulsar's `validateClusterExist` fails with 412 (or 404)."""
    found = await store.get(paths.cluster(cluster))
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


def decode_domain(raw: bytes) -> FailureDomain | None:
    try:
        return FailureDomain.from_bytes(raw)
    except ValueError:
        return None


def newest_revision(values: dict[str, Versioned]) -> int:
    return max((found.revision for found in values.values()), default=0)


def namespace_uses_cluster(key: str, raw: bytes, cluster: str) -> bool:
    """`/admin/policies/{tenant}/{ns}` (or v1 `{tenant}/{cluster}/{ns}`) replicating to
    `cluster`."""
    parts = key.removeprefix(paths.TENANTS + "/").split("/")
    if len(parts) == 3 and parts[1] == cluster:
        return True
    if len(parts) not in (2, 3):
        return False
    try:
        document: Any = load_json(raw)
    except ValueError:
        return False
    replication = document.get("replication_clusters") if isinstance(document, dict) else None
    return isinstance(replication, list) and cluster in replication


class ClusterService:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    # -- clusters ---------------------------------------------------------------------------

    async def list_clusters(self) -> list[str]:
        return [c for c in await self.store.children(paths.CLUSTERS) if c != GLOBAL_CLUSTER]

    async def get_cluster(self, cluster: str) -> ClusterData:
        path = paths.cluster(cluster)
        found = await self.store.get(path)
        if found is None:
            raise NotFound(CLUSTER_NOT_FOUND)
        return ClusterData.from_stored(path, found.value)

    async def create_cluster(self, cluster: str, data: ClusterData | None) -> None:
        check_cluster_name(cluster)
        if data is None:
            raise InvalidInput(CLUSTER_DATA_REQUIRED)
        check_urls(data)
        try:
            await self.store.create(paths.cluster(cluster), data.to_bytes())
        except store_errors.AlreadyExists as exc:
            raise Conflict(CLUSTER_EXISTS) from exc

    async def update_cluster(self, cluster: str, data: ClusterData | None) -> None:
        if data is None:
            raise InvalidInput(CLUSTER_DATA_REQUIRED)
        check_urls(data)

        def replace(current: bytes | None) -> bytes:
            if current is None:
                raise NotFound(CLUSTER_NOT_FOUND)
            return data.to_bytes()

        await self.store.update(paths.cluster(cluster), replace)

    async def delete_cluster(self, cluster: str) -> None:
        await retry_on_conflict(lambda: self._delete_cluster_once(cluster))

    async def _delete_cluster_once(self, cluster: str) -> None:
        found = await self.store.get(paths.cluster(cluster))
        if found is None:
            raise NotFound(CLUSTER_NOT_FOUND)
        namespaces = await self.store.get_children_values(paths.TENANTS)
        if any(namespace_uses_cluster(k, v.value, cluster) for k, v in namespaces.items()):
            raise PreconditionFailed(CLUSTER_NOT_EMPTY)
        isolation_path = paths.namespace_isolation_policies(cluster)
        isolation = await self.store.get(isolation_path)
        if isolation is not None and _non_empty_json(isolation.value):
            raise PreconditionFailed(CLUSTER_NOT_EMPTY)
        await self.store.commit(
            [
                Guard(paths.cluster(cluster), found.revision),
                Guard(paths.TENANTS, newest_revision(namespaces), tree=True),
                Guard(isolation_path, 0 if isolation is None else isolation.revision),
            ],
            delete_trees=[paths.cluster(cluster)],
        )

    async def require_cluster(self, cluster: str, *, status_404: bool = False) -> Versioned:
        return await require_cluster(self.store, cluster, status_404=status_404)

    # -- failure domains --------------------------------------------------------------------

    async def failure_domains(self, cluster: str) -> dict[str, FailureDomain]:
        entries = await read_failure_domain_entries(self.store, cluster)
        decoded = {name: decode_domain(found.value) for name, found in entries.items()}
        return {name: domain for name, domain in decoded.items() if domain is not None}

    async def get_failure_domain(self, cluster: str, domain: str) -> FailureDomain:
        await self.require_cluster(cluster)
        path = paths.failure_domain(cluster, domain)
        found = await self.store.get(path)
        if found is None:
            raise NotFound(f"Domain {domain} for cluster {cluster} does not exist")
        return FailureDomain.from_stored(path, found.value)

    async def set_failure_domain(self, cluster: str, domain: str, data: FailureDomain) -> None:
        require_free_name("Failure domain name", domain)
        brokers = None if data.brokers is None else unique(data.brokers)
        document = FailureDomain(brokers=brokers)
        await retry_on_conflict(lambda: self._set_failure_domain_once(cluster, domain, document))

    async def _set_failure_domain_once(
        self, cluster: str, domain: str, document: FailureDomain
    ) -> None:
        found = await self.require_cluster(cluster)
        values = await read_failure_domain_entries(self.store, cluster)
        wanted = set(document.brokers or [])
        for name, other in values.items():
            existing = decode_domain(other.value)
            if name == domain or existing is None:
                continue
            duplicates = [b for b in existing.brokers or [] if b in wanted]
            if duplicates:
                raise Conflict(f"{java_to_string(duplicates)} already exists in {name}")
        await self.store.commit(
            [
                Guard(paths.cluster(cluster), found.revision),
                Guard(paths.failure_domains(cluster), newest_revision(values), tree=True),
            ],
            puts={paths.failure_domain(cluster, domain): document.to_bytes()},
        )

    async def delete_failure_domain(self, cluster: str, domain: str) -> None:
        await self.require_cluster(cluster)
        try:
            await self.store.delete(paths.failure_domain(cluster, domain))
        except store_errors.NotFound as exc:
            raise NotFound(f"Domain-name {domain} or cluster {cluster} does not exist") from exc


def _non_empty_json(raw: bytes) -> bool:
    try:
        return bool(load_json(raw))
    except ValueError:
        return True
