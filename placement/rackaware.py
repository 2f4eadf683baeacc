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
from collections.abc import Collection, Sequence

from placement import check
from placement.config import PlacementConfig
from placement.coverage import CoverageEnsemble
from placement.describe import describe_ensemble
from placement.errors import InvalidPlacementRequest, NotEnoughBookies, Shortage
from placement.model import Adherence, EnsembleRequest, Placement
from placement.picking import Picker, explain_failure, fill
from placement.select import pick, pick_many
from placement.topology import Topology


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
            short_set="racks in the topology", shortage=Shortage.FAULT_DOMAINS,
            needed=ens.min_distinct,
            available=picker.topology.num_racks,
            constraint="enforceMinNumRacksPerWriteQuorum with a single rack",
        )
    picks = pick_many(picker.pool, ens.ensemble_size, picker.rng, picker.eligible,
                      picker.selector)
    if picks is None:
        raise NotEnoughBookies(short_set="eligible bookies", needed=ens.ensemble_size,
                               available=picker.eligible_count(),
                               shortage=Shortage.ELIGIBLE_BOOKIES)
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
            needed=1, available=0, shortage=Shortage.REPLACEMENTS,
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
