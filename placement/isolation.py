"""Bookie isolation groups (Pulsar's IsolatedBookieEnsemblePlacementPolicy, §6.5).

Which writable bookies a namespace may use, in order:

1. bookies of its primary groups;
2. if the primary groups have fewer writable bookies than E: also its secondary groups;
3. if primary + secondary still have fewer than E: also ungrouped bookies (no entry in
   `/bookies`) - Pulsar #12025; with `strict_unassigned_exclusion=False` (the classic
   policy) ungrouped bookies are always eligible;
4. bookies of any other group: never.

A primary group `*` disables isolation. Without a namespace group the broker-wide
`bookkeeperClientIsolationGroups` apply; without those, `strictBookieAffinityEnabled`
gives the namespace empty groups (so it may use only ungrouped bookies).

Extension: `AffinityGroups.strict` (`bookkeeperAffinityGroupStrict` on the namespace's
BookieAffinityGroupData) stops at step 2: never an ungrouped bookie, never another group's.

The topology is filtered to the allowed set (a memoised view) and the rack-, region- or
zone-aware policy places inside it, so rack rules still apply.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placement import check, policies
from placement.config import PlacementConfig, split_groups
from placement.describe import DESCRIPTIONS, Descriptions, describe_ensemble
from placement.errors import NotEnoughBookies, Shortage
from placement.model import Adherence, EnsembleRequest, Placement, Source
from placement.topology import MemoKey, Topology


@dataclass(frozen=True, slots=True)
class AffinityGroups:
    """A namespace's bookie affinity: primary and secondary groups, strict or not."""

    primary: tuple[str, ...]
    secondary: tuple[str, ...] = ()
    strict: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AffinityGroups:
        """From BookieAffinityGroupData JSON (plus the `bookkeeperAffinityGroupStrict` field)."""
        return cls(
            primary=split_groups(data.get("bookkeeperAffinityGroupPrimary")),
            secondary=split_groups(data.get("bookkeeperAffinityGroupSecondary")),
            strict=bool(data.get("bookkeeperAffinityGroupStrict", False)),
        )

    @property
    def disables_isolation(self) -> bool:
        return "*" in self.primary


def effective_groups(
    namespace: AffinityGroups | None, config: PlacementConfig
) -> AffinityGroups | None:
    """The groups that apply to a namespace, or None for no isolation."""
    if namespace is not None:
        return None if namespace.disables_isolation else namespace
    if config.isolation_groups:
        groups = AffinityGroups(config.isolation_groups, config.secondary_isolation_groups)
        return None if groups.disables_isolation else groups
    if config.strict_bookie_affinity_enabled:
        return AffinityGroups(())
    return None


@dataclass(frozen=True, slots=True)
class GroupCounts:
    """Which bookies a namespace's groups hold, and how many are writable."""

    primary: frozenset[str]
    secondary: frozenset[str]
    ungrouped: frozenset[str]
    primary_writable: int
    secondary_writable: int
    per_group: Mapping[str, int]


@dataclass(frozen=True)
class CountsKey(MemoKey[GroupCounts]):
    primary: tuple[str, ...]
    secondary: tuple[str, ...]


@dataclass(frozen=True)
class AllowedViewKey(MemoKey[Topology]):
    """The view for an ensemble size: which of the views below it is."""

    groups: AffinityGroups
    ensemble_size: int
    strict_unassigned_exclusion: bool


@dataclass(frozen=True)
class ViewKey(MemoKey[Topology]):
    """A view of the topology holding the groups' bookies and, as needed, more."""

    groups: AffinityGroups
    use_secondary: bool
    use_ungrouped: bool


@dataclass(frozen=True)
class SourcesKey(MemoKey[Descriptions]):
    """Members described with their source (primary, secondary, ungrouped) under groups."""

    primary: tuple[str, ...]
    secondary: tuple[str, ...]


def _counts(topology: Topology, groups: AffinityGroups) -> GroupCounts:
    def build() -> GroupCounts:
        primary: set[str] = set()
        for g in groups.primary:
            primary |= topology.bookies_in_group(g)
        secondary: set[str] = set()
        for g in groups.secondary:
            secondary |= topology.bookies_in_group(g)
        secondary -= primary
        grouped: set[str] = set()
        for members in topology.group_members.values():
            grouped |= members
        known = topology.known
        per_group = {g: len(topology.bookies_in_group(g) & known)
                     for g in (*groups.primary, *groups.secondary)}
        return GroupCounts(frozenset(primary), frozenset(secondary), known - grouped,
                           len(primary & known), len(secondary & known), per_group)

    return topology.memo(CountsKey(groups.primary, groups.secondary), build)


def allowed_view(
    topology: Topology, groups: AffinityGroups, ensemble_size: int, config: PlacementConfig
) -> Topology:
    """The topology restricted to the bookies `groups` may use for an ensemble of E."""
    key = AllowedViewKey(groups, ensemble_size, config.strict_unassigned_exclusion)
    return topology.memo(key, lambda: _allowed_view(topology, groups, ensemble_size, config))


def _described_view(view: Topology, topology: Topology, groups: AffinityGroups) -> Topology:
    """`view`, whose placements describe members with their source under `groups`."""
    view.memo(DESCRIPTIONS, lambda: _descriptions(topology, groups))
    return view


def _allowed_view(
    topology: Topology, groups: AffinityGroups, ensemble_size: int, config: PlacementConfig
) -> Topology:
    c = _counts(topology, groups)
    use_secondary = c.primary_writable < ensemble_size
    total = c.primary_writable + (c.secondary_writable if use_secondary else 0)
    if groups.strict:
        use_ungrouped = False
    elif config.strict_unassigned_exclusion:
        use_ungrouped = total < ensemble_size
    else:
        use_ungrouped = True
    key = ViewKey(groups, use_secondary, use_ungrouped)

    def reasons() -> dict[str, str]:
        out: dict[str, str] = {}
        for b in topology.bookies:
            if b in c.primary or (use_secondary and b in c.secondary):
                continue
            if b in c.ungrouped:
                if use_ungrouped:
                    continue
                out[b] = ("ungrouped, not allowed under strict isolation" if groups.strict else
                          f"ungrouped, not needed: primary+secondary groups have {total} "
                          "writable bookies")
            elif b in c.secondary:
                out[b] = (f"secondary group '{topology.group_of.get(b)}' not needed: primary "
                          f"groups have {c.primary_writable} writable bookies")
            else:
                out[b] = f"other group '{topology.group_of.get(b)}'"
        return out

    view = topology.memoised(key)
    if view is None:
        why = reasons()
        view = topology.restrict(key, (b for b in topology.bookies if b not in why), why)
    return _described_view(view, topology, groups)


def source_of(topology: Topology, groups: AffinityGroups, bookie: str) -> Source:
    c = _counts(topology, groups)
    if bookie in c.primary:
        return Source.PRIMARY
    if bookie in c.secondary:
        return Source.SECONDARY
    return Source.UNGROUPED


def _short_set(groups: AffinityGroups, view: Topology) -> str:
    names = ", ".join(f"'{g}'" for g in (*groups.primary, *groups.secondary)) or "no groups"
    if groups.strict:
        return f"writable bookies in groups {names} (strict)"
    return f"writable bookies allowed for groups {names}"


def _rethrow(exc: NotEnoughBookies, topology: Topology, groups: AffinityGroups,
             view: Topology, ensemble_size: int) -> NotEnoughBookies:
    counts = dict(_counts(topology, groups).per_group)
    if exc.shortage is Shortage.ELIGIBLE_BOOKIES:
        return exc.derive(short_set=_short_set(groups, view), group_counts=counts)
    return exc.derive(group_counts=counts)


def _descriptions(topology: Topology, groups: AffinityGroups) -> Descriptions:
    """Memoised ChosenBookie of each bookie, with its source under `groups`."""
    key = SourcesKey(groups.primary, groups.secondary)
    return topology.memo(key, lambda: Descriptions(
        topology, lambda b: source_of(topology, groups, b)))


def _graded(topology: Topology, groups: AffinityGroups, result: Placement,
            request: EnsembleRequest, config: PlacementConfig, view: Topology) -> Placement:
    """`result` graded on the full topology, members described with their source."""
    chosen = describe_ensemble(topology, result.ensemble, _descriptions(topology, groups))
    grade, why = isolation_verdict(topology, groups, result.ensemble, request, config, view)
    return Placement(result.ensemble, grade, (why, *result.reasons[1:]), chosen,
                     result.replaced, result.replacement)


def isolation_verdict(
    topology: Topology, groups: AffinityGroups, ensemble: Sequence[str],
    request: EnsembleRequest, config: PlacementConfig, view: Topology | None = None,
) -> tuple[Adherence, str]:
    """The policy verdict on the full topology, FAIL if a member is outside the allowed set."""
    view = view or allowed_view(topology, groups, len(ensemble), config)
    outside = [b for b in ensemble if b in view.filtered]
    if outside:
        return Adherence.FAIL, f"outside the allowed groups: {outside}"
    return check.fault_domain_verdict(
        topology, ensemble, request.write_quorum, request.ack_quorum, config)


@dataclass(frozen=True, slots=True)
class IsolatedPolicy:
    """The mode's policy (`inner`) run inside the bookies `groups` allow; implements
    `policies.Policy`, so callers never branch on isolation (see `engine.policy_for`)."""

    groups: AffinityGroups
    inner: policies.Policy

    def adherence(
        self, topology: Topology, ensemble: Sequence[str], write_quorum: int, ack_quorum: int,
        config: PlacementConfig,
    ) -> Adherence:
        request = EnsembleRequest(len(ensemble), write_quorum, ack_quorum)
        return isolation_verdict(topology, self.groups, ensemble, request, config)[0]

    def new_ensemble(
        self, topology: Topology, request: EnsembleRequest, config: PlacementConfig,
        rng: random.Random, exclude: Collection[str] = frozenset(),
    ) -> Placement:
        """newEnsemble inside the allowed bookies."""
        request.validate()
        view = allowed_view(topology, self.groups, request.ensemble_size, config)
        try:
            return self.inner.new_ensemble(view, request, config, rng, exclude)
        except NotEnoughBookies as exc:
            raise _rethrow(exc, topology, self.groups, view, request.ensemble_size) from None
        # every member is in the view, whose verdict equals the full one, and the view
        # describes members with their source (_described_view): nothing to redo

    def replace_bookie(
        self, topology: Topology, request: EnsembleRequest, config: PlacementConfig,
        rng: random.Random, ensemble: Sequence[str], bookie: str,
        exclude: Collection[str] = frozenset(),
    ) -> Placement:
        """replaceBookie inside the allowed bookies."""
        request.validate()
        view = allowed_view(topology, self.groups, request.ensemble_size, config)
        try:
            result = self.inner.replace_bookie(view, request, config, rng, ensemble, bookie,
                                               exclude)
        except NotEnoughBookies as exc:
            raise _rethrow(exc, topology, self.groups, view, 1) from None
        return _graded(topology, self.groups, result, request, config, view)

    def replace_to_adhere(
        self, topology: Topology, request: EnsembleRequest, config: PlacementConfig,
        rng: random.Random, ensemble: Sequence[str], exclude: Collection[str] = frozenset(),
    ) -> Placement:
        """BP-54 repair inside the allowed bookies: each member outside them (another
        group's bookie, an ungrouped one under strict) is replaced first, inside them, even
        when the rack rule holds with it; then the mode's repair makes the window rule hold.
        Empty ensemble and FAIL (as BookKeeper) when the allowed bookies cannot."""
        request.validate()
        view = allowed_view(topology, self.groups, request.ensemble_size, config)
        outside = [b for b in ensemble if b in view.filtered]
        current = tuple(ensemble)
        taken = set(exclude) | set(ensemble)
        for bookie in outside:
            try:
                placed = self.inner.replace_bookie(view, request, config, rng, current, bookie,
                                                   taken)
            except NotEnoughBookies as exc:
                why = _rethrow(exc, topology, self.groups, view, 1)
                return Placement((), Adherence.FAIL, (f"no replacement for {bookie}: {why}",))
            current = placed.ensemble
            taken |= set(current)
        result = self.inner.replace_to_adhere(view, request, config, rng, current,
                                              set(exclude) | set(outside))
        if not result.ensemble:
            return result
        return _graded(topology, self.groups, result, request, config, view)
