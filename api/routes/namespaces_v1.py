"""`/admin/namespaces` routes (namespaces_v1): the one v1 path `pulsar-admin` still calls."""

from __future__ import annotations

from fastapi import APIRouter, Query

from api.deps import NamespacePoliciesDep
from api.routes.namespaces import errors
from api.shapes.params import AntiAffinityGroupName, ClusterName
from api.shapes.responses import NamespaceNames

router = APIRouter(prefix="/admin/namespaces", tags=["namespaces"])


@router.get(
    "/{cluster}/antiAffinity/{group}",
    operation_id="getAntiAffinityNamespacesV1",
    summary=(
        "Get all namespaces that are grouped by given anti-affinity group in a given cluster "
        "(v1 path, tenant given as `property`)"
    ),
    description=(
        "What `pulsar-admin namespaces get-anti-affinity-namespaces` calls. Same answer as "
        "`GET /admin/v2/namespaces/{cluster}/antiAffinity/{group}?tenant=`."
    ),
    response_model=NamespaceNames,
    responses=errors(
        {
            400: "Tenant should not be null",
            412: "anti-affinity group can't be empty. / Cluster <c> does not exist.",
        }
    ),
)
async def get_anti_affinity_namespaces_v1(
    cluster: ClusterName,
    group: AntiAffinityGroupName,
    policies: NamespacePoliciesDep,
    property: str | None = Query(default=None, description="The tenant whose namespaces to list"),
) -> list[str]:
    return await policies.anti_affinity_namespaces(cluster, group, property)
