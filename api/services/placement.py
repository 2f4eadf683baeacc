"""Placement dry run for a namespace: where would a new ledger's ensemble go, and why.

Runs `placement.explain` on the live topology (`metastore.topology.TopologySnapshot`) with the
namespace's placement inputs (`metastore.readers.read_namespace_placement`: its persistence
sizes and bookie affinity groups, strict extension included; without groups of its own the
broker-wide `bookkeeperClientIsolationGroups` and `strictBookieAffinityEnabled` apply). Sizes
in the query override the namespace's. Nothing is written: a preview is not a reservation.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from api.errors import InvalidInput
from api.services.namespaces import NamespaceService
from api.settings import Settings
from metastore.readers import read_namespace_placement
from metastore.store import MetadataStore
from metastore.topology import TopologySnapshot
from placement import EnsembleRequest, Explanation, explain, with_sizes


@dataclass(frozen=True)
class Sizes:
    """Optional overrides of E, Qw and Qa."""

    ensemble_size: int | None = None
    write_quorum: int | None = None
    ack_quorum: int | None = None


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
        namespaces: NamespaceService,
        snapshot: TopologySnapshot,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.namespaces = namespaces
        self.settings = namespaces.settings
        self.snapshot = snapshot
        self.config = snapshot.config
        self.rng = rng or random.Random()

    async def preview(self, tenant: str, namespace: str, sizes: Sizes) -> Explanation:
        """The dry run; NotEnoughBookies (412) or InvalidPlacementRequest (400) when the
        ensemble cannot be placed."""
        await self.namespaces.policies(tenant, namespace)  # 404 in Pulsar's words
        inputs = await read_namespace_placement(self.store, tenant, namespace, self.config)
        request = with_sizes(
            inputs.request,
            ensemble_size=sizes.ensemble_size,
            write_quorum=sizes.write_quorum,
            ack_quorum=sizes.ack_quorum,
        )
        request.validate()
        view = await self.snapshot.current()
        check_bounds(request, self.settings, len(view.topology.known | set(view.topology.bookies)))
        return explain(view.topology, request, self.config, self.rng, affinity=inputs.affinity)
