"""One module per `pulsar-admin` command group; `GROUPS` is what the root app mounts."""

from cli.commands import (
    bookies,
    brokers,
    changes,
    clusters,
    namespaces,
    ns_isolation_policy,
    storage,
    tenants,
)

GROUPS = [
    clusters.app,
    ns_isolation_policy.app,
    brokers.app,
    tenants.app,
    namespaces.app,
    bookies.app,
    storage.app,
    changes.app,
]

__all__ = ["GROUPS"]
