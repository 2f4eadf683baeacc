"""The repair plan for one violating fragment: plain functions over placement/, no Spark.

For each member that is itself the fault (not registered, read-only, another group's,
ungrouped under strict, rackless under enforce, unplaceable location) `replace_bookie`
picks its successor inside the namespace's allowed bookies; if a window still spans too
few racks (regions), `replace_to_adhere` changes the fewest positions. The result is
judged again by `check_fragment`: whatever is left is reported as unfixable, with the
reason (the engine's NotEnoughBookies explanation, or the remaining violation reasons).
Runs in the audit's tasks (`pipeline.partitions`), on the executors, for the violating
fragments only.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.placement_inputs import PlacementInputs
from placement import EnsembleRequest, PlacementError, replace_bookie, replace_to_adhere
from placement.violations import Violation, check_fragment, member_violations

WINDOW_KINDS = Violation.TOO_FEW_RACKS | Violation.TOO_FEW_REGIONS


@dataclass(frozen=True, slots=True)
class Move:
    """Copy the fragment's data from `bookie_out` to `bookie_in` at `position`."""

    ledger_id: int
    segment: int
    position: int
    bookie_out: int
    bookie_in: int
    bytes: float  # what bookie_in gains: the fragment's bytes x Qw / E


@dataclass(frozen=True, slots=True)
class FragmentPlan:
    moves: tuple[Move, ...]
    ensemble: tuple[int, ...]  # after the moves
    remaining: Violation  # what the moves cannot fix
    reason: str  # why (empty when nothing remains)


def plan_fragment(
    cluster: PlacementInputs, ledger_id: int, segment: int, ensemble: Sequence[int], *,
    write_quorum: int, ack_quorum: int, policy: int, nbytes: float,
) -> FragmentPlan:
    """Moves that make the fragment adhere, and what they cannot fix."""
    ids, topology, config = cluster.bookie_ids, cluster.topology, cluster.config
    affinity = cluster.affinity(policy)
    current = [ids[b] for b in ensemble]
    before = check_fragment(topology, current, write_quorum, ack_quorum, config,
                            affinity=affinity)
    if before.violations & Violation.BAD_ENSEMBLE:
        return FragmentPlan((), tuple(ensemble), before.violations, "; ".join(before.reasons))
    request = EnsembleRequest(len(current), write_quorum, ack_quorum)
    rng = random.Random(ledger_id * 1_000 + segment)
    failures: list[str] = []
    for bookie in list(current):
        if not member_violations(topology, bookie, config, affinity=affinity):
            continue
        try:
            placed = replace_bookie(topology, request, config, rng, ensemble=current,
                                    bookie=bookie, affinity=affinity)
        except PlacementError as exc:
            failures.append(f"no replacement for {bookie}: {exc}")
            continue
        current = list(placed.ensemble)
    if check_fragment(topology, current, write_quorum, ack_quorum, config,
                      affinity=affinity).violations & WINDOW_KINDS:
        try:
            placed = replace_to_adhere(topology, request, config, rng, ensemble=current,
                                       affinity=affinity)
        except PlacementError as exc:
            failures.append(f"no adhering ensemble: {exc}")
        else:
            if placed.ensemble:
                current = list(placed.ensemble)
            else:
                failures.append("no adhering ensemble: " + "; ".join(placed.reasons))
    after = check_fragment(topology, current, write_quorum, ack_quorum, config,
                           affinity=affinity)
    index = cluster.bookie_index()
    new = tuple(index[b] for b in current)
    share = nbytes * write_quorum / len(new)
    moves = tuple(Move(ledger_id, segment, i, old, b, share)
                  for i, (old, b) in enumerate(zip(ensemble, new, strict=True)) if old != b)
    reason = ""
    if after.violations:
        reason = "; ".join([*failures, *after.reasons])
    return FragmentPlan(moves, new, after.violations, reason)
