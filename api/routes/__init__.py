"""Routers, one per resource; `ROUTERS` is what the app mounts, in matching order."""

from api.routes import (
    bookies,
    bookkeeper_admin,
    brokers,
    changes,
    clusters,
    console,
    lookup,
    namespaces,
    namespaces_v1,
    ns_isolation_policies,
    placement,
    racks_bulk,
    storage_audit,
    storage_bookies,
    tenants,
    topics,
    watch,
)

ROUTERS = [
    bookies.router,
    racks_bulk.router,
    brokers.router,
    ns_isolation_policies.router,
    clusters.router,
    tenants.router,
    namespaces.router,
    namespaces_v1.router,
    placement.router,
    lookup.router,
    topics.router,
    bookkeeper_admin.router,
    storage_audit.router,
    storage_bookies.router,
    watch.router,
    changes.router,
    console.router,
]

__all__ = ["ROUTERS"]
