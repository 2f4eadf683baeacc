"""`/admin/v2/clusters`: clusters and their failure domains."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Response

from api.deps import ClustersDep
from api.shapes.models import ClusterData, FailureDomain, JavaLinkedHashSetOrNull
from api.shapes.params import ClusterName, FailureDomainName
from api.shapes.responses import ClusterNames, FailureDomains

router = APIRouter(prefix="/admin/v2/clusters", tags=["clusters"])

NO_CLUSTER_412: dict[int | str, dict[str, Any]] = {
    412: {"description": "Cluster <cluster> does not exist."}
}


@router.get(
    "",
    operation_id="getClusters",
    summary="Get the list of all the Pulsar clusters.",
    response_model=ClusterNames,
)
async def get_clusters(clusters: ClustersDep) -> list[str]:
    """Names of all clusters, without the reserved `global`."""
    return await clusters.list_clusters()


@router.get(
    "/{cluster}",
    operation_id="getCluster",
    summary="Get the configuration for the specified cluster.",
    response_model=ClusterData,
    response_model_exclude_none=True,
    responses={404: {"description": "Cluster does not exist"}},
)
async def get_cluster(cluster: ClusterName, clusters: ClustersDep) -> ClusterData:
    """A cluster's service URLs and TLS settings (null fields omitted)."""
    return await clusters.get_cluster(cluster)


@router.put(
    "/{cluster}",
    operation_id="createCluster",
    summary="Create a new cluster.",
    status_code=200,
    response_class=Response,
    responses={
        200: {"description": "Cluster has been created (empty body)."},
        400: {"description": "cluster data is required, or an illegal URL"},
        409: {"description": "Cluster already exists"},
        412: {"description": "Cluster name is not valid"},
    },
)
async def create_cluster(
    cluster: ClusterName, clusters: ClustersDep, data: ClusterData | None = Body(default=None)
) -> Response:
    """Register a cluster with its service URLs.

    The name may hold letters, digits and `-=:._` (no `/`), else 412. Every URL given must parse
    and use its scheme (`http`, `https`, `pulsar`, `pulsar+ssl`), else 400. Answers 200 with an
    empty body, as Pulsar does.
    """
    await clusters.create_cluster(cluster, data)
    return Response(status_code=200)


@router.post(
    "/{cluster}",
    operation_id="updateCluster",
    summary="Update the configuration for a cluster (a full replace).",
    status_code=200,
    response_class=Response,
    responses={
        200: {"description": "Cluster has been updated (empty body)."},
        400: {"description": "cluster data is required, or an illegal URL"},
        404: {"description": "Cluster does not exist"},
    },
)
async def update_cluster(
    cluster: ClusterName, clusters: ClustersDep, data: ClusterData | None = Body(default=None)
) -> Response:
    """Replace a cluster's data (a full replace, not a merge). 200 with an empty body."""
    await clusters.update_cluster(cluster, data)
    return Response(status_code=200)


@router.delete(
    "/{cluster}",
    operation_id="deleteCluster",
    summary="Delete an existing cluster, with its failure domains and isolation-policy record.",
    status_code=204,
    response_class=Response,
    responses={
        404: {"description": "Cluster does not exist"},
        412: {"description": "Cluster not empty"},
    },
)
async def delete_cluster(cluster: ClusterName, clusters: ClustersDep) -> Response:
    """Remove a cluster, its failure domains and its isolation-policy record.

    Refused with 412 while a v1 namespace (`tenant/cluster/ns`) lives under the cluster or its
    isolation policies are not empty; v2 namespaces replicating to it do not hold it, as in
    Pulsar 4.0.
    """
    await clusters.delete_cluster(cluster)
    return Response(status_code=204)


@router.get(
    "/{cluster}/peers",
    operation_id="getPeerCluster",
    summary="Get the peer-cluster data for the specified cluster.",
    response_model=ClusterNames | None,
    responses={200: {"description": "The peer clusters' names, or an empty body when none "
                     "are set."},
               404: {"description": "Cluster does not exist"}},
)
async def get_peer_clusters(cluster: ClusterName, clusters: ClustersDep) -> Any:
    """The cluster's `peerClusterNames` in their stored order: the clusters lookups of a
    namespace not replicated here are redirected to."""
    peers = await clusters.peer_clusters(cluster)
    return Response(status_code=200) if peers is None else peers


@router.post(
    "/{cluster}/peers",
    operation_id="setPeerClusterNames",
    summary="Update peer-cluster-list for a cluster.",
    status_code=204,
    response_class=Response,
    responses={
        404: {"description": "Cluster does not exist"},
        412: {"description": "<cluster> itself can't be part of peer-list / Peer cluster <c> "
                             "does not exist"},
    },
)
async def set_peer_clusters(
    cluster: ClusterName,
    clusters: ClustersDep,
    peers: Annotated[JavaLinkedHashSetOrNull, Body(examples=[["us-east"]])] = None,
) -> Response:
    """Replace the cluster's peer clusters (a JSON list of names; null or empty clears them).
    Each must be an existing cluster other than this one."""
    await clusters.set_peer_clusters(cluster, peers)
    return Response(status_code=204)


@router.get(
    "/{cluster}/failureDomains",
    operation_id="getFailureDomains",
    summary="Get the cluster failure domains.",
    response_model=FailureDomains,
    response_model_exclude_none=True,
)
async def get_failure_domains(
    cluster: ClusterName, clusters: ClustersDep
) -> dict[str, FailureDomain]:
    """Every failure domain of the cluster, by name (`{}` when none).

    A failure domain is a set of brokers that can fail together; with `failureDomainsEnabled`,
    namespaces of one anti-affinity group are spread across domains.
    """
    return await clusters.failure_domains(cluster)


@router.get(
    "/{cluster}/failureDomains/{domainName}",
    operation_id="getDomain",
    summary="Get a domain in a cluster",
    response_model=FailureDomain,
    response_model_exclude_none=True,
    responses={
        **NO_CLUSTER_412,
        404: {"description": "Domain <domain> for cluster <cluster> does not exist"},
    },
)
async def get_domain(
    cluster: ClusterName, domainName: FailureDomainName, clusters: ClustersDep
) -> FailureDomain:
    """One failure domain: the brokers in it."""
    return await clusters.get_failure_domain(cluster, domainName)


@router.post(
    "/{cluster}/failureDomains/{domainName}",
    operation_id="setFailureDomain",
    summary="Set the failure domain of the cluster (create or replace).",
    status_code=204,
    response_class=Response,
    responses={
        **NO_CLUSTER_412,
        409: {"description": "[<brokers>] already exists in <other domain>"},
    },
)
async def set_failure_domain(
    cluster: ClusterName,
    domainName: FailureDomainName,
    clusters: ClustersDep,
    domain: FailureDomain | None = Body(default=None),
) -> Response:
    """Create or replace a failure domain.

    A broker belongs to at most one domain of the cluster: a broker already in another domain is a
    409 naming it and that domain.
    """
    await clusters.set_failure_domain(cluster, domainName, domain or FailureDomain())
    return Response(status_code=204)


@router.delete(
    "/{cluster}/failureDomains/{domainName}",
    operation_id="deleteFailureDomain",
    summary="Delete the failure domain of the cluster",
    status_code=200,
    response_class=Response,
    responses={
        **NO_CLUSTER_412,
        200: {"description": "Deleted (empty body)."},
        404: {"description": "Domain-name <domain> or cluster <cluster> does not exist"},
    },
)
async def delete_failure_domain(
    cluster: ClusterName,
    domainName: FailureDomainName,
    clusters: ClustersDep,
) -> Response:
    """Remove a failure domain. 200 with an empty body, as Pulsar does."""
    await clusters.delete_failure_domain(cluster, domainName)
    return Response(status_code=200)
