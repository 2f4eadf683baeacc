"""Isolation-aware adherence of a *stored* fragment, with the kinds of violation it has.

`check.verdict` answers "does this ensemble meet the rack/region/zone rule"; `isolation`
answers "which bookies may a namespace's next ensemble use". An auditor looking at a
fragment written earlier needs both, itemised, so it can say *why* and plan a repair.
`check_fragment` composes the two (it reuses `check.rack_verdict`, `check.region_verdict`,
`check.zone_verdict` and `isolation.effective_groups`; no rule is restated here) and
returns one `FragmentVerdict`: the adherence, a `Violation` bit set and readable reasons.

Each kind is judged on its own, so one fault is one bit:

- rack/region/zone windows are counted on the location recorded for every member of the
  stored ensemble, registered or not (a bookie that died does not also make its window
  "span fewer racks": that is NOT_REGISTERED, not TOO_FEW_RACKS);
- TOO_FEW_RACKS / DEFAULT_RACK_UNDER_ENFORCE in rack-aware mode, TOO_FEW_REGIONS in
  region-aware mode (only when `reppRegionsToWrite` sets a durability minimum),
  ZONE_RULE in zone-aware mode: exactly the modes `check.verdict` applies them in;
- FOREIGN_GROUP: a member of a group that is neither primary nor secondary for the
  namespace's effective groups (namespace policy, else broker defaults, else
  `strictBookieAffinityEnabled` = no group at all);
- UNGROUPED_UNDER_STRICT: a member of no group when the namespace's groups are strict.

Non-strict namespaces (Pulsar's fallback, #12025): a placement takes secondary-group
bookies once the primary groups are short, and ungrouped bookies once primary+secondary
are short. Whether they were short *when the fragment was written* is not in any
snapshot, so a stored fragment on a secondary or ungrouped bookie is NOT a violation in
non-strict mode; only another group's bookie is (no fallback ever reaches it). Judging
stored data by today's counts would flag every ledger written during a past outage and
make the repair plan churn data that broke no rule.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from placement import check
from placement.config import PlacementConfig, PlacementMode
from placement.isolation import AffinityGroups, effective_groups
from placement.model import Adherence
from placement.topology import Topology, region_of


class Violation(enum.IntFlag):
    """What is wrong with a stored fragment (bits; stable values, stored in Parquet)."""

    NONE = 0
    TOO_FEW_RACKS = 1 << 0
    TOO_FEW_REGIONS = 1 << 1
    FOREIGN_GROUP = 1 << 2
    UNGROUPED_UNDER_STRICT = 1 << 3
    DEFAULT_RACK_UNDER_ENFORCE = 1 << 4
    NOT_REGISTERED = 1 << 5
    READ_ONLY = 1 << 6
    BAD_LOCATION = 1 << 7  # a rack of the wrong depth for the mode (unplaceable)
    ZONE_RULE = 1 << 8  # zone-aware window rule (scalar check only)
    BAD_ENSEMBLE = 1 << 9  # E/Qw/Qa inconsistent, or a bookie listed twice


#: Kinds that belong to one member; a repair replaces that member.
MEMBER_KINDS = (Violation.FOREIGN_GROUP | Violation.UNGROUPED_UNDER_STRICT
                | Violation.DEFAULT_RACK_UNDER_ENFORCE | Violation.NOT_REGISTERED
                | Violation.READ_ONLY | Violation.BAD_LOCATION)


def kind_names(bits: int) -> list[str]:
    """Names of the kinds set in `bits`, in bit order."""
    return [v.name for v in Violation if v and v.name and bits & v]


@dataclass(frozen=True, slots=True)
class FragmentVerdict:
    """Adherence of one stored fragment, its violation kinds and why."""

    adherence: Adherence
    violations: Violation
    reasons: tuple[str, ...] = ()


def check_fragment(
    topology: Topology,
    ensemble: Sequence[str],
    write_quorum: int,
    ack_quorum: int,
    config: PlacementConfig,
    *,
    affinity: AffinityGroups | None = None,
) -> FragmentVerdict:
    """The verdict on a stored fragment of a namespace whose own groups are `affinity`."""
    found = Violation.NONE
    reasons: list[str] = []
    e = len(ensemble)
    if not (e >= write_quorum >= ack_quorum > 0) or len(set(ensemble)) != e:
        return FragmentVerdict(Adherence.FAIL, Violation.BAD_ENSEMBLE, (
            f"ensemble of {e} ({list(ensemble)}) does not fit E >= Qw={write_quorum} >= "
            f"Qa={ack_quorum} > 0 with distinct bookies",))
    groups = effective_groups(affinity, config)
    for bookie in ensemble:
        kind, why = _member(topology, bookie, groups)
        found |= kind
        reasons.extend(why)
    kind, why, grade = _windows(topology, ensemble, write_quorum, ack_quorum, config)
    found |= kind
    reasons.extend(why)
    if found:
        return FragmentVerdict(Adherence.FAIL, found, tuple(reasons))
    return FragmentVerdict(grade, found, tuple(reasons) or ("adheres",))


def member_violations(
    topology: Topology, bookie: str, config: PlacementConfig, *,
    affinity: AffinityGroups | None = None,
) -> Violation:
    """The kinds one member brings to any fragment of the namespace (what a repair replaces).

    Includes DEFAULT_RACK_UNDER_ENFORCE in rack-aware mode: every member sits in the write
    quorum that starts at its own position, so the window rule and this one agree.
    """
    kind, _ = _member(topology, bookie, effective_groups(affinity, config))
    if (topology.mode is PlacementMode.RACK and config.enforce_min_num_racks_per_write_quorum
            and topology.rack_of(bookie) == topology.default_location):
        kind |= Violation.DEFAULT_RACK_UNDER_ENFORCE
    return kind


def _member(
    topology: Topology, bookie: str, groups: AffinityGroups | None,
) -> tuple[Violation, list[str]]:
    kind = Violation.NONE
    why: list[str] = []
    if bookie in topology.read_only:
        kind |= Violation.READ_ONLY
        why.append(f"{bookie} is read-only")
    elif bookie not in topology.writable:
        kind |= Violation.NOT_REGISTERED
        why.append(f"{bookie} is not registered")
    if bookie in topology.unplaceable:
        kind |= Violation.BAD_LOCATION
        why.append(f"{bookie}: {topology.unplaceable[bookie]}")
    if groups is not None:
        group = topology.group_of.get(bookie)
        if group is None:
            if groups.strict:
                kind |= Violation.UNGROUPED_UNDER_STRICT
                why.append(f"{bookie} has no group; the namespace's groups "
                           f"{_names(groups)} are strict")
        elif group not in groups.primary and group not in groups.secondary:
            kind |= Violation.FOREIGN_GROUP
            why.append(f"{bookie} is in group '{group}', not one of {_names(groups)}")
    return kind, why


def _names(groups: AffinityGroups) -> str:
    text = f"primary {list(groups.primary)}"
    return text + (f", secondary {list(groups.secondary)}" if groups.secondary else "")


def _windows(
    topology: Topology, ensemble: Sequence[str], write_quorum: int, ack_quorum: int,
    config: PlacementConfig,
) -> tuple[Violation, list[str], Adherence]:
    """The mode's window rules on the recorded locations of every member."""
    members = frozenset(ensemble)
    if topology.mode is PlacementMode.ZONE:
        grade, why = check.zone_verdict(ensemble, write_quorum, topology.rack_of, members,
                                        config.min_num_zones_per_write_quorum,
                                        config.desired_num_zones_per_write_quorum)
        if grade is Adherence.FAIL:
            return Violation.ZONE_RULE, [why], grade
        return Violation.NONE, [why] if grade is Adherence.MEETS_SOFT else [], grade
    if topology.mode is PlacementMode.REGION:
        grade, why = check.region_verdict(ensemble, write_quorum, ack_quorum,
                                          lambda b: region_of(topology.rack_of(b)), members,
                                          config.min_regions_for_durability)
        if grade is Adherence.FAIL:
            return Violation.TOO_FEW_REGIONS, [why], grade
        return Violation.NONE, [], grade
    kind = Violation.NONE
    out: list[str] = []
    grade, why = check.rack_verdict(ensemble, write_quorum, topology.rack_of, members,
                                    config.min_num_racks_per_write_quorum, False,
                                    topology.default_location)
    if grade is Adherence.FAIL:
        kind |= Violation.TOO_FEW_RACKS
        out.append(why)
    if config.enforce_min_num_racks_per_write_quorum:
        # min_racks=0: the same rule with only its default-rack clause left
        grade, why = check.rack_verdict(ensemble, write_quorum, topology.rack_of, members, 0,
                                        True, topology.default_location)
        if grade is Adherence.FAIL:
            kind |= Violation.DEFAULT_RACK_UNDER_ENFORCE
            out.append(why)
    return kind, out, Adherence.FAIL if kind else Adherence.MEETS_STRICT
