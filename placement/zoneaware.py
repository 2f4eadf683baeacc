"""Zone-aware placement (BookKeeper's ZoneawareEnsemblePlacementPolicyImpl, §4).

Locations are `/zone/upgradedomain`. Strict mode (default) fills positions one by one:
prefer a zone not used by the k nearest neighbours on each side (k from desired-1 down
to min-1), and an upgrade domain not used by that zone nearby; failing that, exclude
only the zones that would leave a write quorum with too few zones. Bookies in the
default fault domain are never chosen in strict mode. Non-strict mode picks uniformly.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence

from placement import check, exclusions
from placement.config import PlacementConfig
from placement.describe import describe_ensemble, unrepaired
from placement.errors import InvalidPlacementRequest, NotEnoughBookies, Shortage
from placement.model import EnsembleRequest, Placement
from placement.select import pick_many
from placement.topology import DEFAULT_ZONE_UD, Topology, split_zone
from placement.weights import dynamic_choice

Slots = list[str | None]


def _zone(topology: Topology, bookie: str) -> tuple[str, str]:
    return split_zone(topology.rack_of(bookie))


def _near(cur: Slots, idx: int, k: int) -> list[str]:
    e = len(cur)
    out = []
    for j in range(1, k + 1):
        for pos in ((idx - j) % e, (idx + j) % e):
            b = cur[pos]
            if b is not None and pos != idx:
                out.append(b)
    return out


def _candidates(topology: Topology, cur: Slots, idx: int, qw: int, zones_out: set[str],
                taken: Collection[str]) -> list[str]:
    pool = [b for z, members in topology.by_region.items() if z not in zones_out
            for b in members if b not in taken
            and topology.rack_of(b) != DEFAULT_ZONE_UD]
    if not pool:
        return []
    uds: dict[str, set[str]] = {}
    for b in _near(cur, idx, qw - 1):
        z, ud = _zone(topology, b)
        uds.setdefault(z, set()).add(ud)
    res = [b for b in pool if _zone(topology, b)[1] not in uds.get(_zone(topology, b)[0], ())]
    if res:
        return res
    lone: dict[str, set[str]] = {}
    e = len(cur)
    for s in range(idx - qw + 1, idx + 1):
        per: dict[str, set[str]] = {}
        for pos in (p % e for p in range(s, s + qw)):
            member = cur[pos]
            if pos != idx and member is not None:
                z, ud = _zone(topology, member)
                per.setdefault(z, set()).add(ud)
        for z, found in per.items():
            if len(found) == 1:
                lone.setdefault(z, set()).update(found)
    return [b for b in pool if _zone(topology, b)[1] not in lone.get(_zone(topology, b)[0], ())]


def _zones_to_keep_min(topology: Topology, cur: Slots, idx: int, qw: int,
                       min_zones: int) -> set[str]:
    e = len(cur)
    out: set[str] = set()
    for s in range(idx - qw + 1, idx + 1):
        zs = {_zone(topology, b)[0] for pos in (p % e for p in range(s, s + qw))
              if pos != idx and (b := cur[pos]) is not None}
        if len(zs) <= min_zones - 1:
            out |= zs
    return out


def _set_bookie(topology: Topology, config: PlacementConfig, rng: random.Random,
                cur: Slots, idx: int, qw: int, taken: Collection[str]) -> str:
    desired = min(qw, config.desired_num_zones_per_write_quorum)
    min_zones = config.min_num_zones_per_write_quorum
    cands: list[str] = []
    for k in range(desired - 1, min_zones - 2, -1):
        zx = {_zone(topology, b)[0] for b in _near(cur, idx, k)}
        cands = _candidates(topology, cur, idx, qw, zx, taken)
        if cands:
            break
    if not cands:
        zx = _zones_to_keep_min(topology, cur, idx, qw, min_zones)
        cands = _candidates(topology, cur, idx, qw, zx, taken)
    if not cands:
        raise NotEnoughBookies(
            short_set="bookies in zones and upgrade domains that keep the write quorum spread",
            needed=1, available=0,
            constraint=f"each write quorum of {qw} needs >= {min_zones} zones (strict)")
    if config.disk_weight_based_placement_enabled and topology.weights:
        return dynamic_choice(cands, topology.weights,
                              config.bookie_max_multiple_for_weight_based_placement, rng)
    return cands[int(rng.random() * len(cands))]


def _check_strict(request: EnsembleRequest, config: PlacementConfig) -> None:
    e, qw = request.ensemble_size, request.write_quorum
    if e % qw:
        raise InvalidPlacementRequest(f"zone-aware strict placement needs E % Qw == 0 "
                                      f"(E={e}, Qw={qw})")
    if qw <= config.min_num_zones_per_write_quorum:
        raise InvalidPlacementRequest(
            f"zone-aware strict placement needs Qw={qw} > minNumZonesPerWriteQuorum="
            f"{config.min_num_zones_per_write_quorum}")


def _graded(topology: Topology, chosen: Sequence[str], request: EnsembleRequest,
            config: PlacementConfig, **extra: str) -> Placement:
    grade, why = check.fault_domain_verdict(
        topology, chosen, request.write_quorum, request.ack_quorum, config)
    return Placement(tuple(chosen), grade, (why,), describe_ensemble(topology, chosen),
                     replaced=extra.get("replaced"), replacement=extra.get("replacement"))


def _random(topology: Topology, rng: random.Random, k: int,
            taken: Collection[str]) -> list[str]:
    picks = pick_many(topology.bookies, k, rng, lambda b: b not in taken)
    if picks is None:
        available = sum(1 for b in topology.bookies if b not in taken)
        raise NotEnoughBookies(short_set="eligible bookies", needed=k, available=available,
                               shortage=Shortage.ELIGIBLE_BOOKIES)
    return picks


def new_ensemble(
    topology: Topology, request: EnsembleRequest, config: PlacementConfig,
    rng: random.Random, exclude: Collection[str] = frozenset(),
) -> Placement:
    request.validate()
    taken = set(exclude)
    try:
        if not config.enforce_strict_zoneaware_placement:
            return _graded(topology, _random(topology, rng, request.ensemble_size, taken),
                           request, config)
        _check_strict(request, config)
        cur: Slots = [None] * request.ensemble_size
        for idx in range(request.ensemble_size):
            chosen = _set_bookie(topology, config, rng, cur, idx, request.write_quorum, taken)
            cur[idx] = chosen
            taken.add(chosen)
    except NotEnoughBookies as exc:
        raise _explained(topology, config, exclude, exc, [b for b in taken if b]) from None
    return _graded(topology, [b for b in cur if b is not None], request, config)


def _explained(topology: Topology, config: PlacementConfig, exclude: Collection[str],
               exc: NotEnoughBookies, chosen: Collection[str]) -> NotEnoughBookies:
    def unchosen(bookie: str) -> str:
        if topology.rack_of(bookie) == DEFAULT_ZONE_UD:
            return "default fault domain (unresolved zone) under strict zone placement"
        return exclusions.NOT_NEEDED

    return exc.derive(excluded=exclusions.describe(topology, exclude, config, chosen, unchosen))


def replace_bookie(
    topology: Topology, request: EnsembleRequest, config: PlacementConfig,
    rng: random.Random, ensemble: Sequence[str], bookie: str,
    exclude: Collection[str] = frozenset(),
) -> Placement:
    request.validate()
    if bookie not in ensemble:
        raise InvalidPlacementRequest(f"{bookie} is not in the ensemble {list(ensemble)}")
    taken = set(exclude) | set(ensemble)
    idx = list(ensemble).index(bookie)
    try:
        if config.enforce_strict_zoneaware_placement:
            cand = _set_bookie(topology, config, rng, list(ensemble), idx,
                               request.write_quorum, taken)
        else:
            cand = _random(topology, rng, 1, taken)[0]
    except NotEnoughBookies as exc:
        raise _explained(topology, config, taken, exc, ensemble) from None
    new = [cand if b == bookie else b for b in ensemble]
    return _graded(topology, new, request, config, replaced=bookie, replacement=cand)


adherence = check.adherence


def replace_to_adhere(
    topology: Topology, request: EnsembleRequest, config: PlacementConfig,
    rng: random.Random, ensemble: Sequence[str], exclude: Collection[str] = frozenset(),
) -> Placement:
    """Unsupported by BookKeeper's zone-aware policy: returns the ensemble unchanged."""
    return unrepaired(topology, request, config, ensemble, "zone-aware")
