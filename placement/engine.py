"""The entry points the service, storage engine and audit call.

Each picks the policy for the topology's mode and, when the namespace (or the broker
defaults) name bookie affinity groups, runs it inside the allowed bookies (isolation.py).
`explain` is the dry run behind the preview endpoint.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from placement import exclusions, isolation, policies
from placement.config import PlacementConfig, PlacementMode
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
    """A dry-run placement: the ensemble, every bookie left out with the reason, and what it
    ran under (the request, the topology's mode, the isolation groups in effect or None)."""

    placement: Placement
    excluded: tuple[ExcludedBookie, ...]
    request: EnsembleRequest
    mode: PlacementMode
    groups: AffinityGroups | None


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
    return Explanation(placement, excluded, request, topology.mode, groups)
