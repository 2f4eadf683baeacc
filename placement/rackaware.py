"""Rack-aware placement (BookKeeper's RackawareEnsemblePlacementPolicyImpl, §2).

new_ensemble fills positions 0..E-1. The first bookie comes from the client's rack (if
given and not the default rack) or anywhere; each next one from a rack not used since
the last reset that satisfies the write-quorum coverage rule (coverage.py); failing
that, from anywhere under the rule; failing that, with enforcement off, any eligible
bookie (the answer then says FAIL), with enforcement on, NotEnoughBookies.
With fewer than two racks in the topology the ensemble is random and always FAIL (or,
under enforcement with min(Qw, minRacks) > 1, NotEnoughBookies).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Sequence

from placement import check, exclusions
from placement.config import PlacementConfig
from placement.coverage import CoverageEnsemble
from placement.errors import InvalidPlacementRequest, NotEnoughBookies
from placement.model import Adherence, ChosenBookie, EnsembleRequest, Placement, Source
from placement.select import pick, pick_many
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
            short_set="racks with eligible bookies", needed=m, available=len(racks),
            constraint=f"each write quorum of {ens.write_quorum} must span {m} racks",
        )
    available = picker.eligible_count()
    if available < ens.ensemble_size:
        return NotEnoughBookies(short_set="eligible bookies", needed=ens.ensemble_size,
                                available=available)
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

    return NotEnoughBookies(
        short_set=exc.short_set, needed=exc.needed, available=exc.available,
        constraint=exc.constraint, group_counts=exc.group_counts,
        excluded=exc.excluded or exclusions.describe(topology, exclude, config, chosen, unchosen),
    )


def _any_source(_bookie: str) -> Source:
    return Source.ANY


class Descriptions(dict[str, ChosenBookie]):
    """bookie -> its ChosenBookie, built on first use and kept (a Topology never changes)."""

    __slots__ = ("_source", "_topology")

    def __init__(self, topology: Topology, source: Callable[[str], Source] = _any_source):
        super().__init__()
        self._topology = topology
        self._source = source

    def __missing__(self, bookie: str) -> ChosenBookie:
        t = self._topology
        found = ChosenBookie(bookie, t.rack_of(bookie), t.group_of.get(bookie),
                             self._source(bookie))
        if bookie in t.location:  # keep only bookies the topology has seen: bounded
            self[bookie] = found
        return found


def describe_ensemble(
    topology: Topology, ensemble: Sequence[str], descriptions: Descriptions | None = None
) -> tuple[ChosenBookie, ...]:
    """Each member's rack, group and source (Source.ANY unless `descriptions` says)."""
    if descriptions is None:
        descriptions = topology.memo("descriptions", lambda: Descriptions(topology))
    return tuple([descriptions[b] for b in ensemble])


def new_ensemble(
    topology: Topology,
    request: EnsembleRequest,
    config: PlacementConfig,
    rng: random.Random,
    exclude: Collection[str] = frozenset(),
) -> Placement:
    """A new ensemble of E bookies (BookKeeper newEnsemble, §2.3)."""
    request.validate()
    e, w = request.ensemble_size, request.write_quorum
    enforce = config.enforce_min_num_racks_per_write_quorum
    picker = Picker(topology, config, rng, exclude)
    ens = CoverageEnsemble(e, w, topology.location, config.min_num_racks_per_write_quorum)
    notes: list[str] = []
    racks = topology.num_racks
    try:
        if racks < 2:
            _single_rack(picker, ens, enforce)
            notes.append(f"only {racks} rack(s): random ensemble")
        else:
            fill(picker, e, ens, enforce_rule=enforce, local_rack=request.local_rack,
                 notes=notes)
    except NotEnoughBookies as exc:
        raise explain_failure(topology, config, exclude, exc, ens.chosen) from None
    chosen = tuple(ens.chosen)
    grade, why = check.rack_verdict(chosen, w, topology.rack_of, topology.known,
                                    config.min_num_racks_per_write_quorum, enforce,
                                    topology.default_location)
    if racks < 2:
        grade = Adherence.FAIL
    return Placement(chosen, grade, (why, *notes), describe_ensemble(topology, chosen))


def _single_rack(picker: Picker, ens: CoverageEnsemble, enforce: bool) -> None:
    if enforce and ens.min_distinct > 1:
        raise NotEnoughBookies(
            short_set="racks in the topology", needed=ens.min_distinct,
            available=picker.topology.num_racks,
            constraint="enforceMinNumRacksPerWriteQuorum with a single rack",
        )
    picks = pick_many(picker.pool, ens.ensemble_size, picker.rng, picker.eligible,
                      picker.selector)
    if picks is None:
        raise NotEnoughBookies(short_set="eligible bookies", needed=ens.ensemble_size,
                               available=picker.eligible_count())
    for b in picks:
        ens.add(b)


def adherence(
    topology: Topology,
    ensemble: Sequence[str],
    write_quorum: int,
    ack_quorum: int,
    config: PlacementConfig,
) -> Adherence:
    """Rack-aware isEnsembleAdheringToPlacementPolicy (check.rack_verdict)."""
    return check.rack_verdict(ensemble, write_quorum, topology.rack_of, topology.known,
                              config.min_num_racks_per_write_quorum,
                              config.enforce_min_num_racks_per_write_quorum,
                              topology.default_location)[0]


def replace_bookie(
    topology: Topology,
    request: EnsembleRequest,
    config: PlacementConfig,
    rng: random.Random,
    ensemble: Sequence[str],
    bookie: str,
    exclude: Collection[str] = frozenset(),
) -> Placement:
    """Replace `bookie` in `ensemble` (§2.4): same rack, else an unused rack, else random."""
    request.validate()
    if ensemble and bookie not in ensemble:
        raise InvalidPlacementRequest(f"{bookie} is not in the ensemble {list(ensemble)}")
    enforce = config.enforce_min_num_racks_per_write_quorum
    taken = set(exclude) | set(ensemble) | {bookie}
    picker = Picker(topology, config, rng, taken)
    others = [b for b in ensemble if b != bookie]
    other_racks = {topology.rack_of(b) for b in others}
    how = "same rack"
    cand = picker.pick_in_rack(topology.rack_of(bookie), None, taken)
    if cand is None:
        how = "a rack no other member uses"
        cand = picker.pick_any(taken, other_racks)
    if cand is None and not enforce:
        how = "random (no same or unused rack)"
        cand = picker.pick_any(taken)
    if cand is None:
        short = NotEnoughBookies(
            short_set="replacement candidates (same rack, unused rack"
            + (")" if enforce else ", or any)"),
            needed=1, available=0,
            constraint="enforceMinNumRacksPerWriteQuorum" if enforce else "",
        )
        raise explain_failure(topology, config, taken - {bookie}, short, ensemble) from None
    new = tuple(cand if b == bookie else b for b in ensemble) if ensemble else (cand,)
    grade, why = check.rack_verdict(new, request.write_quorum, topology.rack_of,
                                    topology.known, config.min_num_racks_per_write_quorum,
                                    enforce, topology.default_location)
    return Placement(new, grade, (f"replacement from {how}", why),
                     describe_ensemble(topology, new), replaced=bookie, replacement=cand)


def replace_to_adhere(
    topology: Topology,
    request: EnsembleRequest,
    config: PlacementConfig,
    rng: random.Random,
    ensemble: Sequence[str],
    exclude: Collection[str] = frozenset(),
) -> Placement:
    """BP-54 repair (§2.6): the adhering ensemble that changes the fewest positions.

    An ensemble that already adheres comes back unchanged. If no adhering ensemble can be
    built the result has an empty `ensemble` and FAIL, as in BookKeeper.
    """
    request.validate()
    current = tuple(ensemble)
    w = request.write_quorum
    grade = adherence(topology, current, w, request.ack_quorum, config)
    if grade is not Adherence.FAIL:
        return Placement(current, grade, ("already adheres",),
                         describe_ensemble(topology, current))
    excl = set(exclude) | {b for b in current if not topology.is_known(b)}
    m = min(w, config.min_num_racks_per_write_quorum)
    if topology.num_racks < 2 or topology.num_racks < m:
        return Placement((), Adherence.FAIL, (f"only {topology.num_racks} rack(s), need {m}",))
    picker = Picker(topology, config, rng, excl)
    best: tuple[str, ...] = ()
    best_diff = len(current) + 1
    for start in range(len(current)):
        found = _attempt(picker, current, start, w, config.min_num_racks_per_write_quorum)
        if found is None or adherence(topology, found, w, request.ack_quorum,
                                      config) is Adherence.FAIL:
            continue
        diff = sum(1 for a, b in zip(found, current, strict=True) if a != b)
        if diff < best_diff:
            best, best_diff = found, diff
            if diff == 1:
                break
    if not best:
        return Placement((), Adherence.FAIL, ("no adhering ensemble found",))
    return Placement(best, Adherence.MEETS_STRICT,
                     (f"changed {best_diff} position(s) to adhere",),
                     describe_ensemble(topology, best))


def _attempt(picker: Picker, current: tuple[str, ...], start: int, w: int,
             min_racks: int) -> tuple[str, ...] | None:
    e = len(current)
    prov = list(current)
    loc = picker.loc
    ens = CoverageEnsemble(e, w, loc, min_racks)
    m = ens.min_distinct
    prev: str | None = None
    if picker.eligible(prov[start]) and ens.accepts(prov[start]):
        ens.add(prov[start])
        prev = prov[start]
    for i in range(1 if prev else 0, e):
        idx = (start + i) % e
        node = prov[idx]
        if not (picker.eligible(node) and ens.accepts(node)):
            near = {loc.get(prov[(idx - k - 1) % e], picker.default) for k in range(m - 1)}
            near |= {loc.get(prov[(idx + k + 1) % e], picker.default) for k in range(m - 1)}
            scope = {loc[prev]} if prev else set()
            picked = None
            for avoid_racks, avoid in ((near, prov), (scope, prov), (scope, [])):
                picked = pick(picker.pool, picker.rng,
                              lambda b, r=avoid_racks, a=avoid: (  # type: ignore[misc]
                                  loc[b] not in r and b not in a and picker.eligible(b)
                                  and ens.accepts(b)))
                if picked is not None:
                    break
            if picked is None:
                return None
            node = picked
        if not ens.add(node):
            return None
        prov[idx] = node
        prev = node
    if len(ens.chosen) != e:
        return None
    out = [""] * e
    for k, b in enumerate(ens.chosen):
        out[(start + k) % e] = b
    return tuple(out)


def unrepaired(
    topology: Topology, request: EnsembleRequest, config: PlacementConfig,
    ensemble: Sequence[str], policy: str,
) -> Placement:
    """The ensemble unchanged and graded, for policies that cannot repair (as BookKeeper)."""
    current = tuple(ensemble)
    grade, why = check.fault_domain_verdict(
        topology, current, request.write_quorum, request.ack_quorum, config)
    return Placement(current, grade,
                     (why, f"{policy} placement does not repair ensembles (as BookKeeper)"),
                     describe_ensemble(topology, current))
