"""`/admin/v2/tenants` routes (tenants)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Query, Response

from api.deps import TenantsDep
from api.shapes.models import TenantInfo
from api.shapes.params import TenantName
from api.shapes.responses import TenantNames

router = APIRouter(prefix="/admin/v2/tenants", tags=["tenants"])


def errors(reasons: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """`responses=` for the error statuses a route answers, each with its reason text."""
    return {status: {"description": reason} for status, reason in reasons.items()}


@router.get(
    "",
    operation_id="getTenants",
    summary="Get the list of existing tenants.",
    response_model=TenantNames,
)
async def get_tenants(tenants: TenantsDep) -> list[str]:
    """Names of all tenants."""
    return await tenants.list()


@router.get(
    "/{tenant}",
    operation_id="getTenantAdmin",
    summary="Get the admin configuration for a given tenant.",
    response_model=TenantInfo,
    responses=errors({404: "Tenant does not exist"}),
)
async def get_tenant_admin(tenant: TenantName, tenants: TenantsDep) -> Response:
    """A tenant's admin roles and the clusters its namespaces may use."""
    info = await tenants.get(tenant)
    return Response(info.to_bytes(), media_type="application/json")


@router.put(
    "/{tenant}",
    operation_id="createTenant",
    summary="Create a new tenant.",
    status_code=204,
    responses=errors(
        {
            400: "Malformed TenantInfo",
            409: "Tenant already exist",
            412: (
                "Tenant name is not valid / Clusters cannot be null / Clusters cannot be empty or "
                "blank / Clusters do not "
                "exist / AdminRoles contains whitespace in the beginning or end. / Exceed the "
                "maximum number of tenants"
            ),
        }
    ),
)
async def create_tenant(
    tenant: TenantName, tenants: TenantsDep, info: TenantInfo | None = Body(default=None)
) -> Response:
    """Create a tenant with its admin roles and allowed clusters.

    `allowedClusters` must be non-empty, without blank names, and name existing clusters; admin
    roles may not start or end with whitespace (412 otherwise).
    """
    await tenants.create(tenant, info)
    return Response(status_code=204)


@router.post(
    "/{tenant}",
    operation_id="updateTenant",
    summary="Update the admins for a tenant.",
    description="A full replace of the tenant's admin roles and allowed clusters.",
    status_code=204,
    responses=errors(
        {
            400: "Malformed TenantInfo",
            404: "Tenant <tenant> not found",
            412: (
                "Clusters cannot be null / Clusters cannot be empty or blank / Clusters do not "
                "exist / AdminRoles contains "
                "whitespace in the beginning or end. / Active namespaces (a removed cluster is "
                "still used by a namespace of the tenant)"
            ),
        }
    ),
)
async def update_tenant(
    tenant: TenantName, tenants: TenantsDep, info: TenantInfo | None = Body(default=None)
) -> Response:
    await tenants.update(tenant, info)
    return Response(status_code=204)


@router.delete(
    "/{tenant}",
    operation_id="deleteTenant",
    summary="Delete a tenant and all namespaces and topics under it.",
    status_code=204,
    responses=errors(
        {
            404: "Tenant doesn't exist",
            405: (
                "Broker doesn't allow forced deletion of tenants (or, while force-deleting its "
                "namespaces, of namespaces)"
            ),
            409: "The tenant still has active namespaces",
        }
    ),
)
async def delete_tenant(
    tenant: TenantName,
    tenants: TenantsDep,
    force: bool = Query(default=False, description="Delete the tenant's namespaces too"),
) -> Response:
    """Remove a tenant. It must have no namespaces, unless `force` (allowed only with
    the broker's `forceDeleteTenantAllowed`) deletes them too.
    """
    await tenants.delete(tenant, force)
    return Response(status_code=204)
