"""Routers, one per resource; `ROUTERS` is what the app mounts, in matching order."""

from api.routes import (
    bookies,
    brokers,
    clusters,
    namespaces,
    namespaces_v1,
    ns_isolation_policies,
    tenants,
)

ROUTERS = [
    bookies.router,
    brokers.router,
    ns_isolation_policies.router,
    clusters.router,
    tenants.router,
    namespaces.router,
    namespaces_v1.router,
]

__all__ = ["ROUTERS"]
