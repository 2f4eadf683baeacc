"""`/admin/v2/clusters/{cluster}/namespaceIsolationPolicies`: broker isolation policies.

Mounted before `clusters`, so `/namespaceIsolationPolicies/brokers` is matched before the
`{policyName}` route would take `brokers` as a policy name.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Query, Response

from api.deps import IsolationDep
from api.models import BrokerNamespaceIsolationData, NamespaceIsolationData

router = APIRouter(prefix="/admin/v2/clusters", tags=["clusters"])

POLICIES = "/{cluster}/namespaceIsolationPolicies"
NO_CLUSTER_412: dict[int | str, dict[str, Any]] = {
    412: {"description": "Cluster <cluster> does not exist."}
}
NO_RECORD_404: dict[int | str, dict[str, Any]] = {
    404: {"description": "NamespaceIsolationPolicies for cluster <cluster> does not exist"}
}


@router.get(
    POLICIES,
    operation_id="getNamespaceIsolationPolicies",
    summary="Get the namespace isolation policies assigned to the cluster.",
    response_model=dict[str, NamespaceIsolationData],
    response_model_exclude_none=True,
    responses={
        404: {
            "description": "Cluster <cluster> does not exist. / "
            "NamespaceIsolationPolicies for cluster <cluster> does not exist"
        }
    },
)
async def get_namespace_isolation_policies(
    cluster: str, isolation: IsolationDep
) -> dict[str, NamespaceIsolationData]:
    return await isolation.policies(cluster, status_404=True)


@router.get(
    POLICIES + "/brokers",
    operation_id="getBrokersWithNamespaceIsolationPolicy",
    summary="Get list of brokers with namespace-isolation policies attached to them.",
    response_model=list[BrokerNamespaceIsolationData],
    response_model_exclude_none=True,
    responses={**NO_CLUSTER_412, **NO_RECORD_404},
)
async def get_brokers_with_namespace_isolation_policy(
    cluster: str, isolation: IsolationDep
) -> list[BrokerNamespaceIsolationData]:
    return await isolation.brokers(cluster)


@router.get(
    POLICIES + "/brokers/{broker}",
    operation_id="getBrokerWithNamespaceIsolationPolicy",
    summary="Get a broker with namespace-isolation policies attached to it.",
    response_model=BrokerNamespaceIsolationData,
    response_model_exclude_none=True,
    responses={**NO_CLUSTER_412, **NO_RECORD_404},
)
async def get_broker_with_namespace_isolation_policy(
    cluster: str, broker: str, isolation: IsolationDep
) -> BrokerNamespaceIsolationData:
    return await isolation.broker(cluster, broker)


@router.get(
    POLICIES + "/{policyName}",
    operation_id="getNamespaceIsolationPolicy",
    summary="Get the single namespace isolation policy assigned to the cluster.",
    response_model=NamespaceIsolationData,
    response_model_exclude_none=True,
    responses={
        **NO_CLUSTER_412,
        404: {
            "description": "NamespaceIsolationPolicies for cluster <cluster> does not exist / "
            "Cannot find NamespaceIsolationPolicy <policy> for cluster <cluster>"
        },
    },
)
async def get_namespace_isolation_policy(
    cluster: str,
    policyName: str,
    isolation: IsolationDep,
) -> NamespaceIsolationData:
    return await isolation.policy(cluster, policyName)


@router.post(
    POLICIES + "/{policyName}",
    operation_id="setNamespaceIsolationPolicy",
    summary="Set namespace isolation policy (create or replace).",
    status_code=204,
    response_class=Response,
    responses={
        **NO_CLUSTER_412,
        400: {"description": "Invalid format of input policy data. policy: <p>; data: <json>"},
    },
)
async def set_namespace_isolation_policy(
    cluster: str,
    policyName: str,
    isolation: IsolationDep,
    data: NamespaceIsolationData | None = Body(default=None),
    unloadBundles: bool = Query(
        default=True,
        description="Unload the matching namespaces (no bundles are served here: accepted only)",
    ),
) -> Response:
    await isolation.set_policy(cluster, policyName, data)
    return Response(status_code=204)


@router.delete(
    POLICIES + "/{policyName}",
    operation_id="deleteNamespaceIsolationPolicy",
    summary="Delete namespace isolation policy (204 also for an unknown policy).",
    status_code=204,
    response_class=Response,
    responses=NO_CLUSTER_412,
)
async def delete_namespace_isolation_policy(
    cluster: str,
    policyName: str,
    isolation: IsolationDep,
) -> Response:
    await isolation.delete_policy(cluster, policyName)
    return Response(status_code=204)
