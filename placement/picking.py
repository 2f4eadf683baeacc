"""Rack-aware selection shared by the rack- and region-aware policies: the per-call `Picker`
over a pool of candidates, the fill loop of BookKeeper's §2.3, and the explanation of a
shortage."""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Sequence

from placement import exclusions
from placement.config import PlacementConfig
from placement.coverage import CoverageEnsemble
from placement.errors import NotEnoughBookies, Shortage
from placement.select import pick
from placement.topology import Topology

_ROOT_FALLBACK = "position {i}: no bookie met the rack rule, took a random eligible bookie"


class Picker:
    """Per-call selection state over a pool of candidate bookies (a topology or a region)."""

    __slots__ = ("default", "eligible", "enforce", "excl", "loc", "pool", "rng", "selector",
                 "skip_default", "topology")

    def __init__(
        self,
        topology: Topology,
        config: PlacementConfig,
        rng: random.Random,
        exclude: Collection[str],
        pool: Sequence[str] | None = None,
    ) -> None:
        self.topology = topology
        self.rng = rng
        self.loc = topology.location
        self.default = topology.default_location
        self.enforce = config.enforce_min_num_racks_per_write_quorum
        self.pool: Sequence[str] = topology.bookies if pool is None else pool
        weighted = config.disk_weight_based_placement_enabled and topology.selector is not None
        self.selector = topology.selector if weighted and pool is None else None
        excl = exclude if isinstance(exclude, set | frozenset) else frozenset(exclude)
        self.excl = excl
        self.skip_default = exclusions.enforce_excludes_default(topology, config)
        loc, default = self.loc, self.default
        if self.skip_default:
            self.eligible: Callable[[str], bool] = (
                lambda b: b not in excl and loc[b] != default
            )
        else:
            self.eligible = lambda b: b not in excl

    def pick_ruled(self, ens: CoverageEnsemble, avoid_racks: Collection[str] = ()) -> str | None:
        """Random eligible bookie outside `avoid_racks` that the coverage rule accepts."""
        excl, loc, accepts, default = self.excl, self.loc, ens.accepts, self.default
        # the hot path: one flat predicate (eligible, outside avoid_racks, accepted)
        if self.skip_default:
            def ok(b: str) -> bool:
                return (b not in excl and loc[b] not in avoid_racks and loc[b] != default
                        and accepts(b))
        else:
            def ok(b: str) -> bool:
                return b not in excl and loc[b] not in avoid_racks and accepts(b)
        return pick(self.pool, self.rng, ok, self.selector)

    def pick_in_rack(self, rack: str, ens: CoverageEnsemble | None,
                     taken: Collection[str]) -> str | None:
        members = self.topology.by_rack.get(rack, ())
        eligible = self.eligible
        if ens is None:
            return pick(members, self.rng, lambda b: b not in taken and eligible(b))
        return pick(members, self.rng, lambda b: eligible(b) and ens.accepts(b))

    def pick_any(self, taken: Collection[str], avoid_racks: Collection[str] = ()) -> str | None:
        """Random eligible bookie, ignoring the coverage rule."""
        eligible, loc = self.eligible, self.loc
        return pick(self.pool, self.rng,
                    lambda b: b not in taken and loc[b] not in avoid_racks and eligible(b),
                    self.selector)

    def eligible_count(self, taken: Collection[str] = ()) -> int:
        return sum(1 for b in self.pool if b not in taken and self.eligible(b))

    def eligible_racks(self) -> set[str]:
        return {self.loc[b] for b in self.pool if self.eligible(b)}


def fill(
    picker: Picker,
    count: int,
    ens: CoverageEnsemble,
    *,
    enforce_rule: bool,
    local_rack: str | None = None,
    notes: list[str] | None = None,
) -> None:
    """Append `count` bookies to `ens` (the loop of §2.3); raise NotEnoughBookies."""
    loc = picker.loc
    prev: str | None = None
    used: set[str] | None = None
    for _ in range(count):
        if prev is None:
            start = local_rack if local_rack and local_rack != picker.default else None
            chosen = picker.pick_in_rack(start, ens, ()) if start else picker.pick_ruled(ens)
            if chosen is None and start is None:
                raise _short(picker, ens, count)
        else:
            if used is None:
                used = {loc[prev]}
            else:
                used.add(loc[prev])
            chosen = picker.pick_ruled(ens, used)
        if chosen is None:
            used = None
            chosen = picker.pick_ruled(ens)
            if chosen is None and (not enforce_rule or prev is None):
                chosen = picker.pick_any(ens.chosen_set)
                if chosen is not None and notes is not None:
                    notes.append(_ROOT_FALLBACK.format(i=len(ens.chosen)))
            if chosen is None:
                raise _short(picker, ens, count)
        ens.add(chosen)
        prev = chosen


def _short(picker: Picker, ens: CoverageEnsemble, count: int) -> NotEnoughBookies:
    racks = picker.eligible_racks()
    m = ens.min_distinct
    if len(racks) < m:
        return NotEnoughBookies(
            short_set="racks with eligible bookies", shortage=Shortage.FAULT_DOMAINS,
            needed=m, available=len(racks),
            constraint=f"each write quorum of {ens.write_quorum} must span {m} racks",
        )
    available = picker.eligible_count()
    if available < ens.ensemble_size:
        return NotEnoughBookies(short_set="eligible bookies", needed=ens.ensemble_size,
                                available=available, shortage=Shortage.ELIGIBLE_BOOKIES)
    return NotEnoughBookies(
        short_set="bookies meeting the write-quorum rack rule",
        needed=ens.ensemble_size, available=len(ens.chosen),
        constraint=f"each write quorum of {ens.write_quorum} must span {m} racks "
        "(enforceMinNumRacksPerWriteQuorum)",
    )


def explain_failure(
    topology: Topology, config: PlacementConfig, exclude: Collection[str],
    exc: NotEnoughBookies, chosen: Collection[str] = (),
) -> NotEnoughBookies:
    """`exc` with the per-bookie reasons filled in (computed only on failure)."""
    chosen_racks = {topology.rack_of(b) for b in chosen}

    def unchosen(bookie: str) -> str:
        rack = topology.rack_of(bookie)
        if rack in chosen_racks:
            return f"same rack {rack} as a chosen bookie"
        return exclusions.NOT_NEEDED

    return exc.derive(
        excluded=exc.excluded or exclusions.describe(topology, exclude, config, chosen, unchosen),
    )
