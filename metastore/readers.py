"""The reads the API, the storage engine and the audit share, over the repositories
(`metastore.repositories`): a namespace's placement inputs, every namespace's local policies,
a cluster's failure domains, the registered bookies and brokers. Reads that must be fast come
from the watch-fed topology (`metastore.topology`) and caches instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from metastore.documents import BrokerRegistration, Registrations, decode_failure_domain
from metastore.errors import NotFound
from metastore.models import LocalPolicies, Policies
from metastore.repositories import Repositories
from metastore.store import MetadataStore
from placement import AffinityGroups, EnsembleRequest, PlacementConfig, default_request


async def read_policies(store: MetadataStore, tenant: str, namespace: str) -> Policies:
    """The namespace's policies as placement reads them; `NotFound` when the namespace does
    not exist."""
    policies = Repositories(store).policies
    found = await policies.read_placement(tenant, namespace)
    if found is None:
        raise NotFound(policies.path(tenant, namespace))
    return found


async def read_local_policies(
    store: MetadataStore, tenant: str, namespace: str
) -> LocalPolicies | None:
    """The namespace's local policies; None when it has none."""
    return await Repositories(store).local_policies.read_placement(tenant, namespace)


async def read_all_local_policies(store: MetadataStore) -> dict[str, LocalPolicies]:
    """Every namespace's local policies by `tenant/namespace`; unreadable ones are skipped."""
    return await Repositories(store).local_policies.all_for_placement()


async def read_failure_domains(store: MetadataStore, cluster: str) -> dict[str, list[str]]:
    """{domain: broker ids} of a cluster (unreadable domains have none)."""
    entries = await Repositories(store).failure_domains.entries(cluster)
    return {name: decode_failure_domain(held.raw) for name, held in entries.items()}


async def read_registered_bookies(store: MetadataStore) -> Registrations:
    """The bookies registered under `/ledgers/available/`, writable and read-only."""
    return await Repositories(store).bookies.all()


async def read_brokers(store: MetadataStore) -> dict[str, BrokerRegistration]:
    """The brokers registered under `/loadbalance/brokers/`, by id."""
    return await Repositories(store).brokers.all()


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
    return namespace_placement(policies, local, config)


def namespace_placement(
    policies: Policies, local: LocalPolicies | None, config: PlacementConfig
) -> NamespacePlacement:
    """A namespace's placement inputs from its policies and local policies, as read."""
    return NamespacePlacement(
        request=default_request(policies.persistence_request, config),
        affinity=None if local is None else local.bookie_affinity,
    )
