"""`/admin/v2/clusters/{cluster}/namespaceIsolationPolicies`: broker isolation policies.

Mounted before `clusters`, so `/namespaceIsolationPolicies/brokers` is matched before the
`{policyName}` route would take `brokers` as a policy name.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Query, Response

from api.deps import IsolationDep
from api.shapes.models import BrokerNamespaceIsolationData, NamespaceIsolationData
from api.shapes.params import BrokerId, ClusterName, IsolationPolicyName
from api.shapes.responses import BrokersIsolation, IsolationPolicies

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
    response_model=IsolationPolicies,
    response_model_exclude_none=True,
    responses={
        404: {
            "description": "Cluster <cluster> does not exist. / "
            "NamespaceIsolationPolicies for cluster <cluster> does not exist"
        }
    },
)
async def get_namespace_isolation_policies(
    cluster: ClusterName, isolation: IsolationDep
) -> dict[str, NamespaceIsolationData]:
    """Every namespace isolation policy of the cluster, by policy name.

    A policy pins namespaces (regexes of `tenant/namespace`) to primary brokers, with secondary
    brokers as the fallback when fewer primaries than the auto-failover policy demands are up.
    """
    return await isolation.policies(cluster, status_404=True)


@router.get(
    POLICIES + "/brokers",
    operation_id="getBrokersWithNamespaceIsolationPolicy",
    summary="Get list of brokers with namespace-isolation policies attached to them.",
    response_model=BrokersIsolation,
    response_model_exclude_none=True,
    responses={**NO_CLUSTER_412, **NO_RECORD_404},
)
async def get_brokers_with_namespace_isolation_policy(
    cluster: ClusterName, isolation: IsolationDep
) -> list[BrokerNamespaceIsolationData]:
    """Every registered broker with the isolation policies that name it.

    A broker named by a policy (its `primary` or `secondary` regexes match the broker id) gets
    that policy's namespace regexes; when several do, the last by name gives `policyName` and
    `primary`. Brokers no policy names are listed with no policy and no regexes.
    """
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
    cluster: ClusterName, broker: BrokerId, isolation: IsolationDep
) -> BrokerNamespaceIsolationData:
    """One broker with the isolation policy that names it (primary or secondary)."""
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
    cluster: ClusterName,
    policyName: IsolationPolicyName,
    isolation: IsolationDep,
) -> NamespaceIsolationData:
    """One namespace isolation policy of the cluster."""
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
    cluster: ClusterName,
    policyName: IsolationPolicyName,
    isolation: IsolationDep,
    data: NamespaceIsolationData | None = Body(default=None),
    unloadBundles: bool = Query(
        default=True,
        description="Unload the matching namespaces (no bundles are served here: accepted only)",
    ),
) -> Response:
    """Create or replace a namespace isolation policy.

    `namespaces` holds regexes over `tenant/namespace`, `primary` and `secondary` regexes over
    broker ids (Java regex syntax). `namespaces`, `primary`, `secondary` (may be empty) and an
    `auto_failover_policy` of type `min_available` with integer `min_limit` and
    `usage_threshold` are required, else 400. All policies of a cluster live in one document,
    updated with compare-and-set.
    """
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
    cluster: ClusterName,
    policyName: IsolationPolicyName,
    isolation: IsolationDep,
) -> Response:
    """Remove one namespace isolation policy; an unknown name is not an error."""
    await isolation.delete_policy(cluster, policyName)
    return Response(status_code=204)
