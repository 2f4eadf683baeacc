"""Pulsar's metadata paths, verbatim (DESIGN.md section 3).

An etcd key is the path itself; the children of a path are the keys under `path + "/"`.
"""

from __future__ import annotations

BOOKIES_RACK_CONFIG = "/bookies"
BOOKIES_AVAILABLE = "/ledgers/available"
BOOKIES_READONLY = "/ledgers/available/readonly"
BROKERS = "/loadbalance/brokers"
CLUSTERS = "/admin/clusters"
TENANTS = "/admin/policies"
LOCAL_POLICIES = "/admin/local-policies"


def join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in ("", *parts))


def cluster(name: str) -> str:
    return join(CLUSTERS, name)


def failure_domains(cluster_name: str) -> str:
    return join(CLUSTERS, cluster_name, "failureDomain")


def failure_domain(cluster_name: str, domain: str) -> str:
    return join(failure_domains(cluster_name), domain)


def namespace_isolation_policies(cluster_name: str) -> str:
    return join(CLUSTERS, cluster_name, "namespaceIsolationPolicies")


def tenant(name: str) -> str:
    return join(TENANTS, name)


def namespace(tenant_name: str, ns: str) -> str:
    return join(TENANTS, tenant_name, ns)


def local_policies(tenant_name: str, ns: str) -> str:
    return join(LOCAL_POLICIES, tenant_name, ns)


def broker(broker_id: str) -> str:
    return join(BROKERS, broker_id)


def bookie_available(bookie_id: str) -> str:
    return join(BOOKIES_AVAILABLE, bookie_id)


def bookie_readonly(bookie_id: str) -> str:
    return join(BOOKIES_READONLY, bookie_id)


# Namespace bundle ownership (Pulsar's OwnershipCache): `/namespace/{tenant}/{ns}/{range}`.
NAMESPACE_OWNERSHIP = "/namespace"


def namespace_ownership(tenant_name: str, ns: str) -> str:
    return join(NAMESPACE_OWNERSHIP, tenant_name, ns)


def bundle_ownership(tenant_name: str, ns: str, bundle_range: str) -> str:
    return join(NAMESPACE_OWNERSHIP, tenant_name, ns, bundle_range)


# Partitioned topic metadata (Pulsar's `/admin/partitioned-topics/{tenant}/{ns}/...`).
PARTITIONED_TOPICS = "/admin/partitioned-topics"
