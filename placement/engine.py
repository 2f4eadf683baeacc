"""The entry points the service, storage engine and audit call.

Each picks the policy for the topology's mode and, when the namespace (or the broker
defaults) name bookie affinity groups, runs it inside the allowed bookies (isolation.py).
`explain` is the dry run behind the preview endpoint.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placement import exclusions, isolation, policies
from placement.config import PlacementConfig
from placement.isolation import AffinityGroups, effective_groups
from placement.model import Adherence, EnsembleRequest, ExcludedBookie, Placement
from placement.topology import Topology


def new_ensemble(
    topology: Topology,
    request: EnsembleRequest,
    config: PlacementConfig,
    rng: random.Random,
    exclude: Collection[str] = frozenset(),
    affinity: AffinityGroups | None = None,
) -> Placement:
    """A new ensemble for a ledger of a namespace with `affinity` (None: no group)."""
    groups = effective_groups(affinity, config)
    if groups is None:
        return policies.for_mode(topology.mode).new_ensemble(topology, request, config, rng,
                                                             exclude)
    return isolation.new_ensemble(topology, request, config, rng, exclude, groups)


def replace_bookie(
    topology: Topology,
    request: EnsembleRequest,
    config: PlacementConfig,
    rng: random.Random,
    ensemble: Sequence[str],
    bookie: str,
    exclude: Collection[str] = frozenset(),
    affinity: AffinityGroups | None = None,
) -> Placement:
    """Replace `bookie` in `ensemble`; the result's `replacement` took its index."""
    groups = effective_groups(affinity, config)
    if groups is None:
        return policies.for_mode(topology.mode).replace_bookie(
            topology, request, config, rng, ensemble, bookie, exclude)
    return isolation.replace_bookie(topology, request, config, rng, ensemble, bookie,
                                    exclude, groups)


def replace_to_adhere(
    topology: Topology,
    request: EnsembleRequest,
    config: PlacementConfig,
    rng: random.Random,
    ensemble: Sequence[str],
    exclude: Collection[str] = frozenset(),
    affinity: AffinityGroups | None = None,
) -> Placement:
    """Repair a non-adhering ensemble with the fewest changes (rack-aware only)."""
    groups = effective_groups(affinity, config)
    if groups is None:
        return policies.for_mode(topology.mode).replace_to_adhere(
            topology, request, config, rng, ensemble, exclude)
    return isolation.replace_to_adhere(topology, request, config, rng, ensemble, exclude,
                                       groups)


def adherence(
    topology: Topology,
    ensemble: Sequence[str],
    write_quorum: int,
    ack_quorum: int,
    config: PlacementConfig,
    affinity: AffinityGroups | None = None,
) -> Adherence:
    """The policy verdict on a stored ensemble (what the auditor and Spark job call)."""
    groups = effective_groups(affinity, config)
    if groups is None:
        return policies.for_mode(topology.mode).adherence(topology, ensemble, write_quorum,
                                                          ack_quorum, config)
    return isolation.adherence(topology, ensemble, write_quorum, ack_quorum, config, groups)


@dataclass(frozen=True, slots=True)
class Explanation:
    """A dry-run placement: the ensemble, and every bookie left out with the reason."""

    placement: Placement
    excluded: tuple[ExcludedBookie, ...]
    policy: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "ensemble": [b.to_json() for b in self.placement.bookies],
            "adherence": self.placement.adherence.name,
            "reasons": list(self.placement.reasons),
            "excluded": [e.to_json() for e in self.excluded],
            "policy": dict(self.policy),
        }


def describe_policy(
    topology: Topology, request: EnsembleRequest, config: PlacementConfig,
    groups: AffinityGroups | None,
) -> dict[str, Any]:
    """The settings a placement ran under, as JSON."""
    return {
        "mode": topology.mode.value,
        "ensembleSize": request.ensemble_size,
        "writeQuorum": request.write_quorum,
        "ackQuorum": request.ack_quorum,
        "minNumRacksPerWriteQuorum": config.min_num_racks_per_write_quorum,
        "enforceMinNumRacksPerWriteQuorum": config.enforce_min_num_racks_per_write_quorum,
        "diskWeightBasedPlacementEnabled": config.disk_weight_based_placement_enabled,
        "isolation": None if groups is None else {
            "primary": list(groups.primary),
            "secondary": list(groups.secondary),
            "strict": groups.strict,
        },
    }


def explain(
    topology: Topology,
    request: EnsembleRequest,
    config: PlacementConfig,
    rng: random.Random,
    exclude: Collection[str] = frozenset(),
    affinity: AffinityGroups | None = None,
) -> Explanation:
    """Place as new_ensemble would and say why each other bookie was left out.

    Raises NotEnoughBookies (with the same explanation as data) when nothing fits.
    """
    placement = new_ensemble(topology, request, config, rng, exclude, affinity)
    groups = effective_groups(affinity, config)
    view = topology
    if groups is not None:
        view = isolation.allowed_view(topology, groups, request.ensemble_size, config)
    chosen = set(placement.ensemble)
    excluded = tuple(
        ExcludedBookie(b, r)
        for b, r in exclusions.describe(view, exclude, config, chosen,
                                        lambda _: "eligible, not chosen")
    )
    return Explanation(placement, excluded, describe_policy(topology, request, config, groups))
