"""`pulsar-admin tenants`: tenants and their admin roles / allowed clusters."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cli import reads
from cli.client import V2, path
from cli.context import admin
from cli.framework import Output, command, new_group, positional
from cli.output import JsonResult, LinesResult
from javaformats import hash_set_order

app = new_group("tenants", "Operations about tenants")

Tenant = Annotated[str, positional("tenant-name")]
AdminRoles = Annotated[
    str | None,
    typer.Option(
        "-r",
        "--admin-roles",
        show_default=False,
        help="Comma separated list of auth principal allowed to administrate the tenant. "
        "Default: none (create), the current roles (update).",
    ),
]
AllowedClusters = Annotated[
    str | None,
    typer.Option(
        "-c",
        "--allowed-clusters",
        show_default=False,
        help="Comma separated allowed clusters. Default: every existing cluster (create), "
        "the current clusters (update).",
    ),
]


def split(option: str | None) -> list[str] | None:
    """A comma-separated option as the Java CLI splits it (empty items dropped)."""
    if option is None:
        return None
    return [item for item in option.split(",") if item]


def tenant_info(admin_roles: list[str], allowed_clusters: list[str]) -> dict[str, Any]:
    """`new TenantInfoImpl(new HashSet<>(roles), new HashSet<>(clusters))` as sent."""
    return {
        "adminRoles": hash_set_order(admin_roles, copied=True),
        "allowedClusters": hash_set_order(allowed_clusters, copied=True),
    }


as_read = reads.as_read_tenant


@command(app, "list")
def list_tenants(ctx: typer.Context, output: Output = None) -> LinesResult:
    """List the existing tenants, one per line."""
    return reads.list_tenants(admin(ctx))


@command(app, "get")
def get_tenant(ctx: typer.Context, tenant: Tenant, output: Output = None) -> JsonResult:
    """Gets the configuration of a tenant, as JSON (adminRoles, allowedClusters)."""
    return reads.get_tenant(admin(ctx), tenant)


@command(app, "create")
def create_tenant(
    ctx: typer.Context,
    tenant: Tenant,
    admin_roles: AdminRoles = None,
    allowed_clusters: AllowedClusters = None,
    output: Output = None,
) -> None:
    """Creates a new tenant. Without -c the tenant may use every existing cluster."""
    client = admin(ctx)
    clusters = split(allowed_clusters)
    if not clusters:
        clusters = client.get_json(f"{V2}/clusters") or []
    client.put(f"{V2}/tenants{path(tenant)}", tenant_info(split(admin_roles) or [], clusters))


@command(app, "update")
def update_tenant(
    ctx: typer.Context,
    tenant: Tenant,
    admin_roles: AdminRoles = None,
    allowed_clusters: AllowedClusters = None,
    output: Output = None,
) -> None:
    """Updates the configuration for a tenant; an omitted option keeps its current value."""
    client = admin(ctx)
    roles, clusters = split(admin_roles), split(allowed_clusters)
    if roles is None or clusters is None:
        current = as_read(client.get_json(f"{V2}/tenants{path(tenant)}")) or {}
        roles = list(current.get("adminRoles") or []) if roles is None else roles
        clusters = list(current.get("allowedClusters") or []) if clusters is None else clusters
    client.post(f"{V2}/tenants{path(tenant)}", tenant_info(roles, clusters))


@command(app, "delete")
def delete_tenant(
    ctx: typer.Context,
    tenant: Tenant,
    force: Annotated[bool, typer.Option(
        "-f", "--force",
        help="Delete a tenant forcefully by deleting all namespaces under it.")] = False,
    output: Output = None,
) -> None:  # fmt: skip
    """Deletes an existing tenant."""
    admin(ctx).delete(f"{V2}/tenants{path(tenant)}", params={"force": str(force).lower()})
