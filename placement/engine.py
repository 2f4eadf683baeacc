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
from placement.isolation import AffinityGroups, IsolatedPolicy, effective_groups
from placement.model import Adherence, EnsembleRequest, ExcludedBookie, Placement
from placement.policies import Policy
from placement.topology import Topology


def policy_for(
    topology: Topology, config: PlacementConfig, affinity: AffinityGroups | None = None
) -> Policy:
    """The policy for the topology's mode, wrapped in isolation when groups apply (the
    namespace's `affinity`, else the broker-wide groups of `config`)."""
    inner = policies.for_mode(topology.mode)
    groups = effective_groups(affinity, config)
    return inner if groups is None else IsolatedPolicy(groups, inner)


def new_ensemble(
    topology: Topology,
    request: EnsembleRequest,
    config: PlacementConfig,
    rng: random.Random,
    *,
    exclude: Collection[str] = frozenset(),
    affinity: AffinityGroups | None = None,
) -> Placement:
    """A new ensemble for a ledger of a namespace with `affinity` (None: no group)."""
    return policy_for(topology, config, affinity).new_ensemble(
        topology, request, config, rng, exclude)


def replace_bookie(
    topology: Topology,
    request: EnsembleRequest,
    config: PlacementConfig,
    rng: random.Random,
    *,
    ensemble: Sequence[str],
    bookie: str,
    exclude: Collection[str] = frozenset(),
    affinity: AffinityGroups | None = None,
) -> Placement:
    """Replace `bookie` in `ensemble`; the result's `replacement` took its index."""
    return policy_for(topology, config, affinity).replace_bookie(
        topology, request, config, rng, ensemble, bookie, exclude)


def replace_to_adhere(
    topology: Topology,
    request: EnsembleRequest,
    config: PlacementConfig,
    rng: random.Random,
    *,
    ensemble: Sequence[str],
    exclude: Collection[str] = frozenset(),
    affinity: AffinityGroups | None = None,
) -> Placement:
    """Repair a non-adhering ensemble with the fewest changes (rack-aware only)."""
    return policy_for(topology, config, affinity).replace_to_adhere(
        topology, request, config, rng, ensemble, exclude)


def adherence(
    topology: Topology,
    ensemble: Sequence[str],
    write_quorum: int,
    ack_quorum: int,
    config: PlacementConfig,
    *,
    affinity: AffinityGroups | None = None,
) -> Adherence:
    """The policy verdict on a stored ensemble, isolation groups included (what the auditor
    and the Spark job call)."""
    return policy_for(topology, config, affinity).adherence(
        topology, ensemble, write_quorum, ack_quorum, config)


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
    *,
    exclude: Collection[str] = frozenset(),
    affinity: AffinityGroups | None = None,
) -> Explanation:
    """Place as new_ensemble would and say why each other bookie was left out.

    Raises NotEnoughBookies (with the same explanation as data) when nothing fits.
    """
    placement = new_ensemble(topology, request, config, rng, exclude=exclude, affinity=affinity)
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
