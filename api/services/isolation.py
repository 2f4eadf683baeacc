"""Namespace isolation policies: `{policyName: NamespaceIsolationData}` stored as one JSON map
at `/admin/clusters/{c}/namespaceIsolationPolicies`.

As Pulsar's ClustersBase does: an unknown cluster is 404 on the list and 412 everywhere else;
a missing record is 404 for reads, while a write (POST or DELETE) creates it; every validation
failure of a policy is the same 400 that quotes the policy as Jackson's default pretty printer
renders what it deserialized (nulls included). A write is one etcd transaction guarded by the
revisions of the cluster and of the record, so it neither loses a concurrent update nor
outlives a concurrent cluster deletion.
"""

from __future__ import annotations

from typing import Any

from api.errors import InvalidInput, NotFound
from api.naming import require_free_name
from api.services.brokers import registered_brokers
from api.services.clusters import ClusterService
from api.shapes.models import BrokerNamespaceIsolationData, NamespaceIsolationData
from javaformats import jackson_pretty, parse_java_int
from metastore.repositories import Repositories
from metastore.store import MetadataStore, retry_on_conflict
from placement import is_valid_java_regex, java_matches

Policies = dict[str, NamespaceIsolationData]

MIN_AVAILABLE = "min_available"
REQUIRED_PARAMETERS = ("min_limit", "usage_threshold")


def record_missing_reason(cluster: str) -> str:
    return f"NamespaceIsolationPolicies for cluster {cluster} does not exist"


def invalid_policy_reason(policy: str, data: NamespaceIsolationData | None) -> str:
    return (
        f"Invalid format of input policy data. policy: {policy}; "
        f"data: {jackson_pretty(deserialized_view(data), omit_null=False)}"
    )


# -- validation ---------------------------------------------------------------------------------


def is_java_int(text: str) -> bool:
    """`Integer.parseInt` accepts `text`."""
    try:
        parse_java_int(text)
    except ValueError:
        return False
    return True


def compiles(patterns: list[str]) -> bool:
    """Each pattern is valid Java and runs on RE2 (`placement.java_regex`)."""
    return all(is_valid_java_regex(pattern) for pattern in patterns if pattern.strip())


def is_valid_policy(data: NamespaceIsolationData | None) -> bool:
    """NamespaceIsolationDataImpl.validate, then the min_available policy's own checks."""
    if data is None or not data.namespaces or not data.primary or data.secondary is None:
        return False
    if not all(compiles(p) for p in (data.namespaces, data.primary, data.secondary)):
        return False
    failover = data.auto_failover_policy
    if failover is None or failover.policy_type != MIN_AVAILABLE or failover.parameters is None:
        return False
    parameters = failover.parameters
    return all(k in parameters and is_java_int(parameters[k]) for k in REQUIRED_PARAMETERS)


def deserialized_view(data: NamespaceIsolationData | None) -> Any:
    """The policy as Pulsar deserialized it: every field present, unknown enums null."""
    if data is None:
        return None
    failover = data.auto_failover_policy
    return {
        "namespaces": data.namespaces,
        "primary": data.primary,
        "secondary": data.secondary,
        "auto_failover_policy": None
        if failover is None
        else {
            "parameters": failover.parameters,
            "policy_type": failover.policy_type if failover.policy_type == MIN_AVAILABLE else None,
        },
        "unload_scope": data.unload_scope,
    }


# -- broker views -------------------------------------------------------------------------------


def matches_any(patterns: list[str] | None, broker: str) -> bool:
    """Java's `broker.matches(regex)`: the whole name must match."""
    return any(java_matches(pattern, broker) for pattern in patterns or [])


def broker_isolation(broker: str, policies: Policies) -> BrokerNamespaceIsolationData:
    """Every policy naming the broker contributes its namespaces; the last one in the stored
    order (Pulsar's `forEach` over the policies' `LinkedHashMap`) decides `policyName` and
    `primary`."""
    view = BrokerNamespaceIsolationData(brokerName=broker)
    for name, policy in policies.items():
        is_primary = matches_any(policy.primary, broker)
        if is_primary or matches_any(policy.secondary, broker):
            view.namespaceRegex.extend(policy.namespaces or [])
            view.primary = is_primary
            view.policyName = name
    return view


# -- service ------------------------------------------------------------------------------------


class IsolationService:
    def __init__(self, store: MetadataStore, clusters: ClusterService) -> None:
        self.store = store
        self.clusters = clusters
        self.docs = Repositories(store)

    async def policies(self, cluster: str, *, status_404: bool = False) -> Policies:
        await self.clusters.require_cluster(cluster, status_404=status_404)
        found = await self.docs.isolation.get(cluster)
        if found is None:
            raise NotFound(record_missing_reason(cluster))
        # in the stored order: Pulsar reads the document into a `LinkedHashMap`
        return {
            name: NamespaceIsolationData.from_stored(found.path, policy)
            for name, policy in found.value.items()
        }

    async def policy(self, cluster: str, name: str) -> NamespaceIsolationData:
        policies = await self.policies(cluster)
        if name not in policies:
            raise NotFound(f"Cannot find NamespaceIsolationPolicy {name} for cluster {cluster}")
        return policies[name]

    async def set_policy(
        self, cluster: str, name: str, data: NamespaceIsolationData | None
    ) -> None:
        await self.clusters.require_cluster(cluster)
        require_free_name("Namespace isolation policy name", name)
        if data is None or not is_valid_policy(data):
            raise InvalidInput(invalid_policy_reason(name, data))
        document = data.dump()

        def put(policies: dict[str, Any]) -> dict[str, Any]:
            # `NamespaceIsolationPolicies.setPolicy`: a `put` into the stored `LinkedHashMap`
            # (a new policy last, a replaced one where it was)
            return {**policies, name: document}

        await retry_on_conflict(lambda: self._update_once(cluster, put))

    async def delete_policy(self, cluster: str, name: str) -> None:
        await self.clusters.require_cluster(cluster)

        def remove(policies: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in policies.items() if k != name}

        await retry_on_conflict(lambda: self._update_once(cluster, remove))

    async def _update_once(self, cluster: str, change: Any) -> None:
        found_cluster = await self.clusters.require_cluster(cluster)
        docs = self.docs
        found = await docs.isolation.get(cluster)
        current = {} if found is None else found.value
        await (
            docs.transaction()
            .require(docs.clusters.at(cluster, version=found_cluster.version),
                     docs.isolation.at(cluster, version=0 if found is None else found.version))
            .put(docs.isolation, cluster, value=change(current))
            .commit()
        )  # fmt: skip

    async def brokers(self, cluster: str) -> list[BrokerNamespaceIsolationData]:
        policies = await self.policies(cluster)
        return [broker_isolation(b, policies) for b in await registered_brokers(self.store)]

    async def broker(self, cluster: str, broker: str) -> BrokerNamespaceIsolationData:
        return broker_isolation(broker, await self.policies(cluster))
