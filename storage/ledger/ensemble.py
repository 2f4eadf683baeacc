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
from storage.ledger.metadata import (
    PLACEMENT_POLICY_CONFIG,
    LedgerMetadata,
    parse_placement_policy_config,
)


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
    `replaceToAdherePlacementPolicy`, which also replaces members the recorded groups do not
    allow); empty when the policy cannot build one."""
    placed = replace_to_adhere(topology, request_of(metadata), config, rng,
                               ensemble=tuple(ensemble), exclude=exclude,
                               affinity=recorded_affinity(metadata))
    return tuple(placed.ensemble)
