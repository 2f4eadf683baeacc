"""One typed reader per stored document, over `MetadataStore` (decoding in `documents`).

These are the reads the API, the storage engine and the audit share: a namespace's placement
inputs, every namespace's local policies, a cluster's failure domains, the registered bookies
and brokers. Reads that must be fast come from the watch-fed topology (`metastore.topology`)
instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from metastore import paths
from metastore.documents import (
    BrokerRegistration,
    LocalPolicies,
    NamespacePolicies,
    Registrations,
    decode_broker,
    decode_failure_domain,
    decode_local_policies,
    decode_policies,
    direct_children,
    namespace_of_local_policies,
    registrations_of,
)
from metastore.errors import MetastoreError, NotFound
from metastore.store import MetadataStore, Versioned
from placement import AffinityGroups, EnsembleRequest, PlacementConfig, default_request


async def read_policies(store: MetadataStore, tenant: str, namespace: str) -> NamespacePolicies:
    """The namespace's policies; `NotFound` when the namespace does not exist."""
    path = paths.namespace(tenant, namespace)
    found = await store.get(path)
    if found is None:
        raise NotFound(path)
    return decode_policies(path, found.value)


async def read_local_policies(
    store: MetadataStore, tenant: str, namespace: str
) -> LocalPolicies | None:
    """The namespace's local policies; None when it has none."""
    path = paths.local_policies(tenant, namespace)
    found = await store.get(path)
    return None if found is None else decode_local_policies(path, found.value)


async def read_all_local_policies(store: MetadataStore) -> dict[str, LocalPolicies]:
    """Every namespace's local policies by `tenant/namespace`; unreadable ones are skipped."""
    out: dict[str, LocalPolicies] = {}
    for key, held in (await store.get_children_values(paths.LOCAL_POLICIES)).items():
        name = namespace_of_local_policies(key)
        if name is None:
            continue
        try:
            out[name] = decode_local_policies(key, held.value)
        except MetastoreError:
            continue
    return out


async def read_failure_domain_entries(store: MetadataStore, cluster: str) -> dict[str, Versioned]:
    """The stored failure domains of a cluster, by domain name, sorted, undecoded (with their
    revisions, for writers that guard on them)."""
    root = paths.failure_domains(cluster)
    values = direct_children(await store.get_children_values(root), root)
    return {name: values[name] for name in sorted(values)}


async def read_failure_domains(store: MetadataStore, cluster: str) -> dict[str, list[str]]:
    """{domain: broker ids} of a cluster."""
    entries = await read_failure_domain_entries(store, cluster)
    return {name: decode_failure_domain(held.value) for name, held in entries.items()}


async def read_registered_bookies(store: MetadataStore) -> Registrations:
    """The bookies registered under `/ledgers/available/`, writable and read-only."""
    return registrations_of(await store.get_children_values(paths.BOOKIES_AVAILABLE))


async def read_brokers(store: MetadataStore) -> dict[str, BrokerRegistration]:
    """The brokers registered under `/loadbalance/brokers/`, by id."""
    values = await store.get_children_values(paths.BROKERS)
    return {broker: decode_broker(broker, held.value)
            for broker, held in direct_children(values, paths.BROKERS).items()}  # fmt: skip


@dataclass(frozen=True)
class NamespacePlacement:
    """What placing a ledger of a namespace needs: its E/Qw/Qa (persistence policy, else the
    broker defaults) and its own bookie affinity groups (None: the broker-wide groups of
    `PlacementConfig` apply, see `placement.effective_groups`)."""

    request: EnsembleRequest
    affinity: AffinityGroups | None


async def read_namespace_placement(
    store: MetadataStore, tenant: str, namespace: str, config: PlacementConfig
) -> NamespacePlacement:
    """A namespace's placement inputs; `NotFound` when the namespace does not exist."""
    policies = await read_policies(store, tenant, namespace)
    local = await read_local_policies(store, tenant, namespace)
    return NamespacePlacement(
        request=default_request(policies.persistence, config),
        affinity=None if local is None else local.bookie_affinity,
    )
