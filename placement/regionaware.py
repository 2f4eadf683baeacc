"""Region-aware placement (BookKeeper's RegionAwareEnsemblePlacementPolicy, §3).

Regions get contiguous blocks of the ensemble, split as evenly as possible (ceil); a
region that cannot supply its share is "maxed" and the rest is redistributed. Inside a
region, rack-aware selection (rackaware.fill) runs with the region-level rule as parent:
with `reppRegionsToWrite` set, no minRegionsForDurability-1 regions may hold an ack
quorum of a write quorum (hard); otherwise write quorums should span
min(Qw, minNumRacksPerWriteQuorum) regions (soft).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence

from placement import check, exclusions
from placement.config import PlacementConfig
from placement.coverage import CoverageEnsemble
from placement.describe import describe_ensemble, unrepaired
from placement.errors import InvalidPlacementRequest, NotEnoughBookies, Shortage
from placement.model import EnsembleRequest, Placement
from placement.picking import Picker, fill
from placement.topology import Topology


def _validate(request: EnsembleRequest, durability: int) -> None:
    request.validate()
    qw, qa = request.write_quorum, request.ack_quorum
    if qa < durability:
        raise InvalidPlacementRequest(
            f"ack quorum Qa={qa} is less than minRegionsForDurability={durability}")
    if durability > 0 and qa <= qw - qw // durability:
        raise InvalidPlacementRequest(
            f"ack quorum Qa={qa} must exceed Qw - Qw/d = {qw - qw // durability} "
            f"for minRegionsForDurability={durability}")


def _region_level(topology: Topology, request: EnsembleRequest,
                  config: PlacementConfig) -> CoverageEnsemble:
    regions = set(topology.by_region) | set(config.regions_to_write)
    return CoverageEnsemble(
        request.ensemble_size, request.write_quorum, topology.region,
        config.min_num_racks_per_write_quorum,
        durability=config.min_regions_for_durability, ack_quorum=request.ack_quorum,
        all_keys=sorted(regions),
    )


def _fill_region(topology: Topology, config: PlacementConfig, rng: random.Random,
                 exclude: Collection[str], region: str, count: int, write_quorum: int,
                 parent: CoverageEnsemble, notes: list[str]) -> None:
    picker = Picker(topology, config, rng, exclude, topology.by_region[region])
    child = CoverageEnsemble(count, write_quorum, topology.location,
                             config.min_num_racks_per_write_quorum, parent=parent)
    hard = config.enforce_min_num_racks_per_write_quorum or region in config.regions_to_write
    fill(picker, count, child, enforce_rule=hard, notes=notes)


def new_ensemble(
    topology: Topology, request: EnsembleRequest, config: PlacementConfig,
    rng: random.Random, exclude: Collection[str] = frozenset(),
) -> Placement:
    """A new ensemble in region blocks (§3.3)."""
    d = config.min_regions_for_durability
    _validate(request, d)
    avail = sorted(topology.by_region)
    notes: list[str] = []
    try:
        if not avail:
            raise NotEnoughBookies(short_set="writable bookies", needed=request.ensemble_size,
                                   available=0, shortage=Shortage.FAULT_DOMAINS)
        if len(avail) == 1:
            return _one_region(topology, request, config, rng, exclude, avail[0])
        ens = _allocate(topology, request, config, rng, exclude, avail, notes)
    except NotEnoughBookies as exc:
        raise _explained(topology, config, exclude, exc) from None
    chosen = tuple(ens.chosen)
    grade, why = check.fault_domain_verdict(
        topology, chosen, request.write_quorum, request.ack_quorum, config)
    return Placement(chosen, grade, (why, *notes), describe_ensemble(topology, chosen))


def _one_region(topology: Topology, request: EnsembleRequest, config: PlacementConfig,
                rng: random.Random, exclude: Collection[str], region: str) -> Placement:
    notes: list[str] = [f"only region {region} has writable bookies"]
    parent = _region_level(topology, request, config)
    _fill_region(topology, config, rng, exclude, region, request.ensemble_size,
                 request.write_quorum, parent, notes)
    chosen = tuple(parent.chosen)
    grade, why = check.rack_verdict(chosen, request.write_quorum, topology.rack_of,
                                    topology.known, config.min_num_racks_per_write_quorum,
                                    config.enforce_min_num_racks_per_write_quorum,
                                    topology.default_location)
    return Placement(chosen, grade, (why, *notes), describe_ensemble(topology, chosen))


def _allocate(topology: Topology, request: EnsembleRequest, config: PlacementConfig,
              rng: random.Random, exclude: Collection[str], avail: list[str],
              notes: list[str]) -> CoverageEnsemble:
    e, qw = request.ensemble_size, request.write_quorum
    alloc_e = dict.fromkeys(avail, 0)
    alloc_w = dict.fromkeys(avail, 0)
    maxed: set[str] = set()
    rem_e, rem_w = e, qw
    start = int(rng.random() * len(avail))
    local = topology.region.get(request.local_rack or "", None)
    order = [avail[(start + k) % len(avail)] for k in range(len(avail))]
    if local in order:
        order.remove(local)
        order.insert(0, local)
    while True:
        ens = _region_level(topology, request, config)
        before, to_alloc = rem_e, len(avail) - len(maxed)
        for r in order:
            if r not in maxed:
                add = min(rem_e, -(-rem_e // to_alloc)) if to_alloc > 0 else 0
                placed = False
                while add > 0:
                    add_w = max(1, min(rem_w, int(qw * add / e + 0.5)))
                    tmp = ens.copy()
                    try:
                        _fill_region(topology, config, rng, exclude, r, alloc_e[r] + add,
                                     alloc_w[r] + add_w, tmp, notes)
                    except NotEnoughBookies:
                        add -= 1
                        continue
                    ens, placed = tmp, True
                    rem_e, rem_w = rem_e - add, rem_w - add_w
                    alloc_e[r] += add
                    alloc_w[r] += add_w
                    to_alloc -= 1
                    break
                if not placed:
                    maxed.add(r)
            if r in maxed and alloc_e[r] > 0:
                _fill_region(topology, config, rng, exclude, r, alloc_e[r], alloc_w[r], ens,
                             notes)
        if maxed >= set(avail) or rem_e == 0 or rem_e == before:
            break
    _final_checks(ens, e, config)
    return ens


def _final_checks(ens: CoverageEnsemble, e: int, config: PlacementConfig) -> None:
    if len(ens.chosen) != e:
        raise NotEnoughBookies(short_set="bookies the regions could supply", needed=e,
                               available=len(ens.chosen),
                               constraint="region allocation (contiguous blocks per region)")
    d = config.min_regions_for_durability
    if d > 0 and ens.distinct_keys() < d:
        raise NotEnoughBookies(short_set="regions in the ensemble", needed=d,
                               shortage=Shortage.FAULT_DOMAINS,
                               available=ens.distinct_keys(),
                               constraint=f"reppMinimumRegionsForDurability={d}")


def _explained(topology: Topology, config: PlacementConfig, exclude: Collection[str],
               exc: NotEnoughBookies) -> NotEnoughBookies:
    if exc.excluded:
        return exc
    return exc.derive(excluded=exclusions.describe(topology, exclude, config))


def replace_bookie(
    topology: Topology, request: EnsembleRequest, config: PlacementConfig,
    rng: random.Random, ensemble: Sequence[str], bookie: str,
    exclude: Collection[str] = frozenset(),
) -> Placement:
    """§3.4: same rack, else the same region, else any region the durability rule allows."""
    request.validate()
    if ensemble and bookie not in ensemble:
        raise InvalidPlacementRequest(f"{bookie} is not in the ensemble {list(ensemble)}")
    enforce = (config.enable_durability_enforcement_in_replace
               and config.min_regions_for_durability > 0)
    level = CoverageEnsemble(
        request.ensemble_size, request.write_quorum, topology.region,
        config.min_num_racks_per_write_quorum,
        durability=config.min_regions_for_durability if enforce else 1,
        ack_quorum=request.ack_quorum, all_keys=sorted(topology.by_region))
    taken = set(exclude) | set(ensemble)
    for b in ensemble:
        if b == bookie:
            continue
        if b not in topology.region:
            continue
        if not level.accepts(b):
            enforce = False  # anomalous ensemble: durability no longer enforced
        level.add(b)
    region = topology.region.get(bookie) or ""
    cand = None
    if region in topology.by_region:
        picker = Picker(topology, config, rng, taken, topology.by_region[region])
        cand = picker.pick_in_rack(topology.rack_of(bookie), None, taken) or picker.pick_any(
            taken)
    if cand is None:
        picker = Picker(topology, config, rng, taken)
        cand = picker.pick_ruled(level) if enforce else picker.pick_any(taken)
    if cand is None:
        raise _explained(topology, config, taken, NotEnoughBookies(
            short_set="replacement candidates", needed=1, available=0,
            shortage=Shortage.REPLACEMENTS,
            constraint="region durability" if enforce else ""))
    new = tuple(cand if b == bookie else b for b in ensemble) if ensemble else (cand,)
    grade, why = check.fault_domain_verdict(
        topology, new, request.write_quorum, request.ack_quorum, config)
    return Placement(new, grade, (why,), describe_ensemble(topology, new),
                     replaced=bookie, replacement=cand)


adherence = check.adherence


def replace_to_adhere(
    topology: Topology, request: EnsembleRequest, config: PlacementConfig,
    rng: random.Random, ensemble: Sequence[str], exclude: Collection[str] = frozenset(),
) -> Placement:
    """Unsupported by BookKeeper's region-aware policy: returns the ensemble unchanged."""
    return unrepaired(topology, request, config, ensemble, "region-aware")
