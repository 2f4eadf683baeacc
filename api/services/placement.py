"""Placement dry run for a namespace: where would a new ledger's ensemble go, and why.

Runs `placement.explain` on the live topology (`TopologySnapshot`) with the namespace's bookie
affinity group from its local policies (strict extension included) or, without one, the
broker-wide `bookkeeperClientIsolationGroups` (and `strictBookieAffinityEnabled`). Sizes come
from the query, else the namespace's persistence policy, else the broker's
`managedLedgerDefault*`. Nothing is written: a preview is not a reservation.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from api.errors import InvalidInput
from api.models import LocalPolicies, Policies
from api.services.namespaces import NamespaceService
from api.services.topology import TopologySnapshot
from api.settings import Settings
from metastore import paths
from metastore.store import MetadataStore
from placement import AffinityGroups, EnsembleRequest, PlacementConfig, explain


@dataclass(frozen=True)
class Sizes:
    """Optional overrides of E, Qw and Qa."""

    ensemble_size: int | None = None
    write_quorum: int | None = None
    ack_quorum: int | None = None


def default_request(policies: Policies, config: PlacementConfig) -> EnsembleRequest:
    persistence = policies.persistence
    if persistence is not None:
        return EnsembleRequest(persistence.bookkeeperEnsemble, persistence.bookkeeperWriteQuorum,
                               persistence.bookkeeperAckQuorum)  # fmt: skip
    return EnsembleRequest(config.managed_ledger_default_ensemble_size,
                           config.managed_ledger_default_write_quorum,
                           config.managed_ledger_default_ack_quorum)  # fmt: skip


def with_sizes(base: EnsembleRequest, sizes: Sizes) -> EnsembleRequest:
    def pick(given: int | None, default: int) -> int:
        return default if given is None else given

    return EnsembleRequest(
        pick(sizes.ensemble_size, base.ensemble_size),
        pick(sizes.write_quorum, base.write_quorum),
        pick(sizes.ack_quorum, base.ack_quorum),
    )


def affinity_of(local: LocalPolicies | None) -> AffinityGroups | None:
    """The namespace's own groups; None lets the broker-wide groups apply."""
    if local is None or local.bookieAffinityGroup is None:
        return None
    groups = AffinityGroups.from_json(local.bookieAffinityGroup.dump())
    if not groups.primary and not groups.secondary:
        return None
    return groups


async def local_policies(store: MetadataStore, tenant: str, namespace: str) -> LocalPolicies | None:
    path = paths.local_policies(tenant, namespace)
    found = await store.get(path)
    return None if found is None else LocalPolicies.from_stored(path, found.value)


def check_bounds(request: EnsembleRequest, settings: Settings, bookies: int) -> None:
    """Sizes bounded (400 otherwise) by the broker's maximums or, for a what-if beyond them,
    by the bookies the cluster knows, so no request asks for more work than the topology
    holds (`?ensembleSize=3000000` is refused before any placement runs)."""
    for value, bound, label in (
        (request.ensemble_size, settings.managedLedgerMaxEnsembleSize, "Bookkeeper-Ensemble"),
        (request.write_quorum, settings.managedLedgerMaxWriteQuorum, "Bookkeeper-WriteQuorum"),
        (request.ack_quorum, settings.managedLedgerMaxAckQuorum, "Bookkeeper-AckQuorum"),
    ):
        bound = max(bound, bookies)
        if not 0 < value <= bound:
            raise InvalidInput(f"{label} must be <= {bound} and > 0.")


class PlacementService:
    def __init__(
        self,
        store: MetadataStore,
        settings: Settings,
        snapshot: TopologySnapshot,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.namespaces = NamespaceService(store, settings)
        self.snapshot = snapshot
        self.config = snapshot.config
        self.rng = rng or random.Random()

    async def preview(self, tenant: str, namespace: str, sizes: Sizes) -> dict[str, Any]:
        """The dry-run JSON; NotEnoughBookies (412) or InvalidPlacementRequest (400) when the
        ensemble cannot be placed."""
        policies = await self.namespaces.policies(tenant, namespace)
        request = with_sizes(default_request(policies, self.config), sizes)
        view = await self.snapshot.current()
        request.validate()
        check_bounds(request, self.settings, len(view.topology.known | set(view.topology.bookies)))
        affinity = affinity_of(await local_policies(self.store, tenant, namespace))
        explanation = explain(view.topology, request, self.config, self.rng, affinity=affinity)
        return explanation.to_json()
