"""One typed repository per Pulsar document kind, above the store seam.

Services and the storage engine read and write documents here, never by path and raw JSON:
each repository builds its paths (`metastore.paths`) and reads and writes its one model
(`metastore.models`). `Repositories(store)` holds one of each for a store; they keep no state
of their own, so building it is cheap. Ledger metadata and managed-ledger records have theirs
in `metastore.ledgers` and `metastore.managed_ledgers`.
"""

from __future__ import annotations

from metastore.repositories.admin import (
    BookieRegistrations,
    BrokerRegistrations,
    BundleOwnership,
    Clusters,
    FailureDomains,
    ForceGc,
    IsolationPolicies,
    NamespaceIsolation,
    NamespaceLocalPolicies,
    NamespacePolicies,
    NamespaceTopics,
    PartitionedTopics,
    RackConfiguration,
    Tenants,
    ownership_tree,
)
from metastore.repositories.base import (
    READS,
    UNCHANGED,
    Document,
    Mutation,
    Stored,
    Transaction,
    newest_version,
)
from metastore.store import MetadataStore


class Repositories:
    """Every document kind's repository over one store."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.rack_config = RackConfiguration(store)
        self.tenants = Tenants(store)
        self.policies = NamespacePolicies(store)
        self.local_policies = NamespaceLocalPolicies(store)
        self.clusters = Clusters(store)
        self.failure_domains = FailureDomains(store)
        self.isolation = NamespaceIsolation(store)
        self.bookies = BookieRegistrations(store)
        self.brokers = BrokerRegistrations(store)
        self.ownership = BundleOwnership(store)
        self.topics = NamespaceTopics(store)
        self.partitioned_topics = PartitionedTopics(store)

    def transaction(self) -> Transaction:
        return Transaction(self.store)


__all__ = [
    "READS",
    "UNCHANGED",
    "BookieRegistrations",
    "BrokerRegistrations",
    "BundleOwnership",
    "Clusters",
    "Document",
    "FailureDomains",
    "ForceGc",
    "IsolationPolicies",
    "Mutation",
    "NamespaceIsolation",
    "NamespaceLocalPolicies",
    "NamespacePolicies",
    "NamespaceTopics",
    "PartitionedTopics",
    "RackConfiguration",
    "Repositories",
    "Stored",
    "Tenants",
    "Transaction",
    "newest_version",
    "ownership_tree",
]
