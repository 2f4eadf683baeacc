"""Choosing replacements for failed bookies under a ledger's RECORDED placement policy.

The policy is read back from the ledger itself, never from the namespace as it stands now:
Pulsar records the namespace's isolation groups in the ledger's custom metadata
(`EnsemblePlacementPolicyConfig`, plus our `bookkeeperAffinityGroupStrict` property), and
BookKeeper's `replaceBookie` gets that custom metadata. So an ensemble change, a re-replication
and a placement repair all stay inside the groups the ledger was written for; in strict mode
`placement` raises `NotEnoughBookies` (with its `constraint`) instead of going outside them.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence

from placement import (
    AffinityGroups,
    EnsembleRequest,
    PlacementConfig,
    Topology,
    replace_bookie,
    replace_to_adhere,
)
from placement.violations import Violation, member_violations
from storage.ledger.metadata import (
    PLACEMENT_POLICY_CONFIG,
    LedgerMetadata,
    parse_placement_policy_config,
)

# members a segment may not keep under its recorded groups
NOT_ALLOWED = Violation.FOREIGN_GROUP | Violation.UNGROUPED_UNDER_STRICT


def recorded_affinity(metadata: LedgerMetadata) -> AffinityGroups | None:
    """The isolation groups recorded with the ledger (None: no isolation policy recorded)."""
    raw = metadata.custom_metadata.get(PLACEMENT_POLICY_CONFIG)
    return None if raw is None else parse_placement_policy_config(raw)


def request_of(metadata: LedgerMetadata) -> EnsembleRequest:
    return EnsembleRequest(metadata.ensemble_size, metadata.write_quorum_size,
                           metadata.ack_quorum_size)


def replacements(
    topology: Topology,
    metadata: LedgerMetadata,
    config: PlacementConfig,
    rng: random.Random,
    ensemble: Sequence[str],
    failed: Collection[str],
    *,
    exclude: Collection[str] = frozenset(),
) -> dict[int, str]:
    """Index -> new bookie for each failed member of `ensemble` (BookKeeper's loop in
    `LedgerFragmentReplicator`: each choice joins the exclusions, so two replacements never
    pick the same bookie). Raises placement's NotEnoughBookies when the policy cannot."""
    request = request_of(metadata)
    affinity = recorded_affinity(metadata)
    current = list(ensemble)
    excluded = set(exclude) | set(failed) | set(ensemble)
    chosen: dict[int, str] = {}
    for bookie in failed:
        if bookie not in current:
            continue
        index = current.index(bookie)
        placed = replace_bookie(topology, request, config, rng, ensemble=tuple(current),
                                bookie=bookie, exclude=excluded, affinity=affinity)
        new = placed.replacement or placed.ensemble[index]
        current[index] = new
        excluded.add(new)
        chosen[index] = new
    return chosen


def adhering_ensemble(
    topology: Topology,
    metadata: LedgerMetadata,
    config: PlacementConfig,
    rng: random.Random,
    ensemble: Sequence[str],
    *,
    exclude: Collection[str] = frozenset(),
) -> tuple[str, ...]:
    """An ensemble that adheres to the recorded policy with the fewest changes (BP-54's
    `replaceToAdherePlacementPolicy`); empty when the policy cannot build one.

    `placement.replace_to_adhere` repairs the rack/region/zone rule but keeps a member the
    recorded groups do not allow when the rack rule already holds; such members (another
    group's bookie, an ungrouped one under strict) are then replaced one by one through
    `replace_bookie`, which stays inside the groups (NotEnoughBookies when it cannot)."""
    affinity = recorded_affinity(metadata)
    placed = replace_to_adhere(topology, request_of(metadata), config, rng,
                               ensemble=tuple(ensemble), exclude=exclude, affinity=affinity)
    repaired = tuple(placed.ensemble)
    if not repaired:
        return ()
    outside = [b for b in repaired
               if member_violations(topology, b, config, affinity=affinity) & NOT_ALLOWED]
    if not outside:
        return repaired
    chosen = replacements(topology, metadata, config, rng, repaired, outside, exclude=exclude)
    return tuple(chosen.get(i, b) for i, b in enumerate(repaired))
