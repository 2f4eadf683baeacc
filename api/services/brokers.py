"""Brokers as they register under `/loadbalance/brokers/{host:port}` (on a session lease).

`GET /admin/v2/brokers/{cluster}` follows Pulsar's `validateClusterOwnership`: without
authorization any cluster name is accepted and answered with this cluster's brokers; with
authorization, `global` and the local cluster are answered here, another existing cluster is a
307 redirect to that cluster's service URL, and an unknown one is 404.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from api.errors import NotFound, PreconditionFailed
from api.services.clusters import GLOBAL_CLUSTER
from api.settings import Settings
from api.shapes.models import ClusterData
from javaformats import hash_set_order
from metastore.readers import read_brokers
from metastore.repositories import Repositories
from metastore.store import MetadataStore


@dataclass(frozen=True)
class Redirect:
    """Ask the client to repeat the request at another cluster's web service (`host[:port]`)."""

    netloc: str


async def registered_brokers(store: MetadataStore) -> list[str]:
    """The brokers registered under `/loadbalance/brokers`, as the load manager's
    `getAvailableBrokersAsync` collects them: the listed ids into a `HashSet`, so in its
    order."""
    return hash_set_order(sorted(await read_brokers(store)))


async def active_brokers(
    store: MetadataStore, settings: Settings, cluster: str
) -> list[str] | Redirect:
    answered_here = not settings.authorizationEnabled or cluster in (
        GLOBAL_CLUSTER,
        settings.clusterName,
    )
    if answered_here:
        return await registered_brokers(store)
    found = await Repositories(store).clusters.get(cluster)
    if found is None:
        raise NotFound(f"Cluster does not exist: cluster={cluster}")
    return Redirect(service_netloc(cluster, found.value))


def service_netloc(cluster: str, data: ClusterData) -> str:
    """The first `host[:port]` of the cluster's web service URL (`http://h1:8080,h2:8080`)."""
    netloc = urlsplit(data.serviceUrl or "").netloc.split(",")[0]
    if not netloc:
        raise PreconditionFailed(f"Cluster {cluster} has no service URL to redirect to")
    return netloc
