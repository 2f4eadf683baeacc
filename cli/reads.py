"""The read commands' work, free of Typer: each takes the client (and its arguments) and
returns the `Result` to print. The Typer commands (`cli.commands.*`) call these, and so does
`cli.fastpath`, which runs the most common reads without loading Typer at all; one body per
command either way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cli.client import V2, AdminClient, path
from cli.errors import ParameterError
from cli.output import JsonResult, LinesResult, Rows
from javaformats import hash_set_order

CLUSTERS = f"{V2}/clusters"
RACKS = f"{V2}/bookies/racks-info"


def ns_path(namespace: str, *rest: str) -> str:
    """`/admin/v2/namespaces/{tenant}/{ns}/...` after checking the `tenant/namespace` form."""
    parts = namespace.split("/")
    if len(parts) != 2 or not all(parts):
        raise ParameterError(f"Invalid namespace name format: {namespace}, "
                             "expected <tenant>/<namespace>")  # fmt: skip
    return f"{V2}/namespaces{path(*parts, *rest)}"


def as_read_policies(policies: dict[str, Any] | None) -> dict[str, Any] | None:
    """Policies as the Java client holds them: `replication_clusters` is a HashSet."""
    if policies is None or not isinstance(policies.get("replication_clusters"), list):
        return policies
    return {**policies, "replication_clusters": hash_set_order(policies["replication_clusters"])}


def as_read_tenant(info: dict[str, Any] | None) -> dict[str, Any] | None:
    """A TenantInfo as the Java client holds it: both sets in HashSet order."""
    if info is None:
        return None
    shown = dict(info)
    for key in ("adminRoles", "allowedClusters"):
        if isinstance(shown.get(key), list):
            shown[key] = hash_set_order(shown[key])
    return shown


def rack_rows(config: Mapping[str, Any]) -> Rows:
    """`-o table` for racks-placement: one row per bookie."""
    return [
        {"group": group, "bookie": bookie, "rack": info.get("rack"),
         "hostname": info.get("hostname")}
        for group, bookies in config.items()
        for bookie, info in bookies.items()
    ]  # fmt: skip


# -- bookies ------------------------------------------------------------------------------------


def racks_placement(client: AdminClient) -> JsonResult:
    """Pulsar 4.0 pretty-prints the whole rack map (CmdBookies.GetAll: prettyPrint)."""
    return JsonResult(client.get_json(RACKS) or {}, table_rows=rack_rows)


def list_bookies(client: AdminClient) -> JsonResult:
    return JsonResult(client.get_json(f"{V2}/bookies/all"))


def get_bookie_rack(client: AdminClient, bookie: str) -> JsonResult:
    return JsonResult(client.get_json(RACKS + path(bookie)))


# -- clusters and brokers -----------------------------------------------------------------------


def list_clusters(client: AdminClient, current: bool = False) -> LinesResult:
    clusters = client.get_json(CLUSTERS) or []
    runtime = client.get_json(f"{V2}/brokers/configuration/runtime") or {}
    here = runtime.get("clusterName")
    return LinesResult([f"{c}(*)" if current and c == here else c for c in clusters])


def get_cluster(client: AdminClient, cluster: str) -> JsonResult:
    return JsonResult(client.get_json(CLUSTERS + path(cluster)))


def list_brokers(client: AdminClient, cluster: str) -> LinesResult:
    return LinesResult(client.get_json(f"{V2}/brokers{path(cluster)}") or [])


# -- tenants and namespaces ---------------------------------------------------------------------


def list_tenants(client: AdminClient) -> LinesResult:
    return LinesResult(client.get_json(f"{V2}/tenants") or [])


def get_tenant(client: AdminClient, tenant: str) -> JsonResult:
    return JsonResult(as_read_tenant(client.get_json(f"{V2}/tenants{path(tenant)}")))


def list_namespaces(client: AdminClient, tenant: str) -> LinesResult:
    return LinesResult(client.get_json(f"{V2}/namespaces{path(tenant)}") or [])


def namespace_policies(client: AdminClient, namespace: str) -> JsonResult:
    return JsonResult(as_read_policies(client.get_json(ns_path(namespace))))


def namespace_clusters(client: AdminClient, namespace: str) -> LinesResult:
    found = client.get_json(ns_path(namespace, "replication")) or []
    return LinesResult(hash_set_order(found))


__all__ = [
    "as_read_policies",
    "as_read_tenant",
    "get_bookie_rack",
    "get_cluster",
    "get_tenant",
    "list_bookies",
    "list_brokers",
    "list_clusters",
    "list_namespaces",
    "list_tenants",
    "namespace_clusters",
    "namespace_policies",
    "ns_path",
    "rack_rows",
    "racks_placement",
]
