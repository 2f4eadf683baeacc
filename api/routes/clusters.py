"""`/admin/v2/clusters`: clusters and their failure domains."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Response

from api.deps import ClustersDep
from api.models import ClusterData, FailureDomain

router = APIRouter(prefix="/admin/v2/clusters", tags=["clusters"])

NO_CLUSTER_412: dict[int | str, dict[str, Any]] = {
    412: {"description": "Cluster <cluster> does not exist."}
}


@router.get(
    "",
    operation_id="getClusters",
    summary="Get the list of all the Pulsar clusters.",
    response_model=list[str],
)
async def get_clusters(clusters: ClustersDep) -> list[str]:
    return await clusters.list_clusters()


@router.get(
    "/{cluster}",
    operation_id="getCluster",
    summary="Get the configuration for the specified cluster.",
    response_model=ClusterData,
    response_model_exclude_none=True,
    responses={404: {"description": "Cluster does not exist"}},
)
async def get_cluster(cluster: str, clusters: ClustersDep) -> ClusterData:
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
    cluster: str, clusters: ClustersDep, data: ClusterData | None = Body(default=None)
) -> Response:
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
    cluster: str, clusters: ClustersDep, data: ClusterData | None = Body(default=None)
) -> Response:
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
async def delete_cluster(cluster: str, clusters: ClustersDep) -> Response:
    await clusters.delete_cluster(cluster)
    return Response(status_code=204)


@router.get(
    "/{cluster}/failureDomains",
    operation_id="getFailureDomains",
    summary="Get the cluster failure domains.",
    response_model=dict[str, FailureDomain],
    response_model_exclude_none=True,
)
async def get_failure_domains(cluster: str, clusters: ClustersDep) -> dict[str, FailureDomain]:
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
async def get_domain(cluster: str, domainName: str, clusters: ClustersDep) -> FailureDomain:
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
    cluster: str,
    domainName: str,
    clusters: ClustersDep,
    domain: FailureDomain | None = Body(default=None),
) -> Response:
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
    cluster: str,
    domainName: str,
    clusters: ClustersDep,
) -> Response:
    await clusters.delete_failure_domain(cluster, domainName)
    return Response(status_code=200)
