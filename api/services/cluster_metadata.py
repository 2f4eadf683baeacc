"""First-start cluster metadata, as `pulsar standalone` creates it (`PulsarStandalone.start` /
`createNameSpace`): the local cluster with its service URLs, tenant `public` with namespace
`public/default`, and tenant `pulsar` with the system namespace `pulsar/system`, each tenant
allowed on the local cluster; and, first, the BookKeeper root under `/ledgers` (`LAYOUT`,
`INSTANCEID`, `available`, `available/readonly`) that `pulsar initialize-cluster-metadata`
formats (`metastore.ledger_layout.set_up_ledgers_root`).

Every document is created only when absent (an etcd create-if-absent transaction), never
overwritten: a second start, or two servers starting at once against one etcd, leave whatever
is there. As upstream, a namespace whose tenant exists but does not allow the local cluster is
skipped with a warning. `initializeClusterMetadata=false` turns all of it off (for an etcd
shared with other clusters, where an operator creates the metadata).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TypeVar

from api.errors import Forbidden
from api.services.namespaces import NamespaceService
from api.settings import Settings
from api.shapes.models import ClusterData, Policies, TenantInfo
from metastore import errors as store_errors
from metastore.ledger_layout import set_up_ledgers_root
from metastore.repositories import Document, Repositories
from metastore.store import MetadataStore
from metastore.versioned_keys import VersionedKeys

M = TypeVar("M")

log = logging.getLogger(__name__)

PUBLIC_TENANT = "public"
DEFAULT_NAMESPACE = "default"
SYSTEM_TENANT = "pulsar"
SYSTEM_NAMESPACE = "system"
# (tenant, namespace) in the order PulsarStandalone creates them.
STANDALONE_NAMESPACES = ((PUBLIC_TENANT, DEFAULT_NAMESPACE), (SYSTEM_TENANT, SYSTEM_NAMESPACE))


def web_service_url(settings: Settings) -> str:
    """`PulsarService.getWebServiceAddress()`: http://advertisedAddress:webServicePort."""
    return f"http://{settings.advertisedAddress}:{settings.webServicePort}"


def broker_service_url(settings: Settings) -> str:
    """`PulsarService.getBrokerServiceUrl()`: pulsar://advertisedAddress:brokerServicePort."""
    return f"pulsar://{settings.advertisedAddress}:{settings.brokerServicePort}"


def local_cluster_data(settings: Settings) -> ClusterData:
    return ClusterData.built(
        serviceUrl=web_service_url(settings), brokerServiceUrl=broker_service_url(settings)
    )


@dataclass(frozen=True)
class Initialised:
    """What one run created (paths), for the start-up log."""

    created: tuple[str, ...]
    ledgers_instance_id: str | None = None  # /ledgers/INSTANCEID, the existing one if any


async def _create_if_absent(document: Document[M], *key: str, value: M) -> str | None:
    """The path created; None when the document existed."""
    try:
        await document.create(*key, value=value)
    except store_errors.AlreadyExists:
        return None
    return document.path(*key)


async def initialize_cluster_metadata(store: MetadataStore, settings: Settings) -> Initialised:
    """Create what is missing of the standalone metadata; `Unavailable` when etcd is away."""
    keys = VersionedKeys.of(store)
    try:
        instance_id = await set_up_ledgers_root(keys)
    finally:
        await keys.close()
    cluster = settings.clusterName
    docs = Repositories(store)
    made = [await _create_if_absent(docs.clusters, cluster, value=local_cluster_data(settings))]
    namespaces = NamespaceService(store, settings)
    tenant_info = TenantInfo(adminRoles=list(settings.superUserRoles), allowedClusters=[cluster])
    for tenant, namespace in STANDALONE_NAMESPACES:
        made.append(await _create_if_absent(docs.tenants, tenant, value=tenant_info))
        stored = await namespaces.tenant_info(tenant)
        if stored is None:  # deleted between the two calls: leave it to the next start
            continue
        try:
            policies = namespaces.with_defaults(tenant, stored, Policies())
        except Forbidden as exc:
            log.warning("not creating namespace %s/%s: %s", tenant, namespace, exc)
            continue
        made.append(await _create_if_absent(docs.policies, tenant, namespace, value=policies))
    return Initialised(tuple(path for path in made if path is not None), instance_id)


async def keep_initializing(
    store: MetadataStore, settings: Settings, backoff: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0)
) -> Initialised:
    """`initialize_cluster_metadata`, retried while etcd is unavailable (a start against an
    etcd that is not up yet still initialises once it is)."""
    attempt = 0
    while True:
        try:
            done = await initialize_cluster_metadata(store, settings)
        except store_errors.Unavailable as exc:
            delay = backoff[min(attempt, len(backoff) - 1)]
            attempt += 1
            log.warning("cluster metadata not initialised yet (%s); retrying in %.1fs", exc, delay)
            await asyncio.sleep(delay)
            continue
        except Exception:  # e.g. an unreadable tenant document: say so, serve anyway
            log.exception("cluster metadata not initialised")
            return Initialised(())
        if done.created:
            log.info("initialised cluster metadata: created %s", ", ".join(done.created))
        return done


__all__ = [
    "STANDALONE_NAMESPACES",
    "Initialised",
    "broker_service_url",
    "initialize_cluster_metadata",
    "keep_initializing",
    "local_cluster_data",
    "web_service_url",
]
