"""The fault-domain rules: does an ensemble meet the rack, region or zone policy?

The policies grade their own answers with `fault_domain_verdict`. It ignores isolation
groups: an auditor judging a namespace's ledger calls the isolation-aware check
(`placement.adherence` with the namespace's affinity), never this module directly.
Rules (placement.md §2.5, §3, §4.3):

- rack-aware: each of the E cyclic write-quorum windows spans >= min(Qw, minRacks)
  racks, counting only known (writable) bookies; under enforcement no window holds a
  default-rack bookie. Never MEETS_SOFT.
- region-aware: BookKeeper hard-codes MEETS_STRICT (TODO bookkeeper #1898). Here, when
  `reppRegionsToWrite` is set, a window fails if `minRegionsForDurability`-1 regions
  hold an ack quorum of it, or if the ensemble covers fewer regions than required
  (the durability rule the policy builds with); otherwise MEETS_STRICT.
- zone-aware: E % Qw == 0 and Qw > minZones; every window: no default fault domain,
  >= minZones zones, no zone whose bookies share one upgrade domain; fewer than
  min(Qw, desiredZones) zones is MEETS_SOFT.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence

from placement.config import PlacementConfig, PlacementMode
from placement.model import Adherence
from placement.topology import DEFAULT_ZONE_UD, Topology, region_of, split_zone

Verdict = tuple[Adherence, str]


def _window(ensemble: Sequence[str], start: int, write_quorum: int) -> list[str]:
    e = len(ensemble)
    return [ensemble[(start + j) % e] for j in range(write_quorum)]


def rack_verdict(
    ensemble: Sequence[str],
    write_quorum: int,
    rack_of: Callable[[str], str],
    known: Container[str],
    min_racks: int,
    enforce: bool,
    default_rack: str,
) -> Verdict:
    """Rack-aware rule with the reason of the first failing window."""
    if not ensemble:
        return Adherence.FAIL, "empty ensemble"
    m = min(write_quorum, min_racks)
    e = len(ensemble)
    located = [rack_of(b) if b in known else None for b in ensemble]
    ring = located * (1 + -(-write_quorum // e))  # window i is ring[i:i + Qw], wrapping
    for i in range(e):
        racks = set(ring[i:i + write_quorum])
        racks.discard(None)
        if len(racks) < m:
            return Adherence.FAIL, (
                f"write quorum at position {i} spans {len(racks)} rack(s) "
                f"{sorted(r for r in racks if r)}, needs {m}"
            )
        if enforce and default_rack in racks:
            return Adherence.FAIL, (
                f"write quorum at position {i} holds a bookie in {default_rack} under enforce"
            )
    return Adherence.MEETS_STRICT, f"every write quorum spans >= {m} racks"


def region_verdict(
    ensemble: Sequence[str],
    write_quorum: int,
    ack_quorum: int,
    region_of_bookie: Callable[[str], str],
    known: Container[str],
    min_regions: int,
) -> Verdict:
    """Region durability: no (min_regions - 1) regions hold an ack quorum of a window."""
    if not ensemble:
        return Adherence.FAIL, "empty ensemble"
    if any(b not in known for b in ensemble):
        missing = [b for b in ensemble if b not in known]
        return Adherence.FAIL, f"not writable: {missing}"
    if min_regions <= 1:
        return Adherence.MEETS_STRICT, "no region durability requirement"
    regions = {region_of_bookie(b) for b in ensemble}
    if len(regions) < min_regions:
        return Adherence.FAIL, (
            f"ensemble spans {len(regions)} region(s), needs {min_regions}"
        )
    windows = [0] if len(ensemble) == write_quorum else range(len(ensemble))
    for i in windows:
        counts: dict[str, int] = {}
        for b in _window(ensemble, i, write_quorum):
            counts[region_of_bookie(b)] = counts.get(region_of_bookie(b), 0) + 1
        top = sorted(counts.values(), reverse=True)[: min_regions - 1]
        if sum(top) >= ack_quorum:
            return Adherence.FAIL, (
                f"write quorum at position {i}: {min_regions - 1} region(s) hold "
                f"{sum(top)} >= Qa={ack_quorum} copies"
            )
    return Adherence.MEETS_STRICT, f"every ack quorum spans >= {min_regions} regions"


def zone_verdict(
    ensemble: Sequence[str],
    write_quorum: int,
    location: Callable[[str], str],
    known: Container[str],
    min_zones: int,
    desired_zones: int,
) -> Verdict:
    """Zone-aware rule (§4.3), the only one with MEETS_SOFT."""
    e = len(ensemble)
    if not e or e % write_quorum or write_quorum <= min_zones:
        return Adherence.FAIL, f"E={e}, Qw={write_quorum} not placeable with minZones={min_zones}"
    desired = min(write_quorum, desired_zones)
    result: Verdict = (Adherence.MEETS_STRICT, f"every write quorum spans >= {desired} zones")
    for i in range(e):
        uds: dict[str, set[str]] = {}
        per_zone: dict[str, int] = {}
        for b in _window(ensemble, i, write_quorum):
            loc = location(b)
            if b not in known or loc == DEFAULT_ZONE_UD:
                return Adherence.FAIL, f"{b} has no resolved zone (window at {i})"
            zone, ud = split_zone(loc)
            uds.setdefault(zone, set()).add(ud)
            per_zone[zone] = per_zone.get(zone, 0) + 1
        if len(per_zone) < min_zones:
            return Adherence.FAIL, (
                f"write quorum at {i} spans {len(per_zone)} zone(s) < {min_zones}"
            )
        for zone, count in per_zone.items():
            if count > 1 and len(uds[zone]) == 1:
                return Adherence.FAIL, f"write quorum at {i}: zone {zone} bookies share one UD"
        if len(per_zone) < desired:
            result = (Adherence.MEETS_SOFT,
                      f"write quorum at {i} spans {len(per_zone)} zone(s) < desired {desired}")
    return result


def fault_domain_verdict(
    topology: Topology,
    ensemble: Sequence[str],
    write_quorum: int,
    ack_quorum: int,
    config: PlacementConfig,
) -> Verdict:
    """The rack/region/zone rules of `topology.mode` alone, with the reason. It knows
    nothing of isolation groups: the adherence of a namespace's ensemble is
    `placement.adherence(..., affinity=...)` (isolation-aware)."""
    if topology.mode is PlacementMode.ZONE:
        return zone_verdict(ensemble, write_quorum, topology.rack_of, topology.known,
                            config.min_num_zones_per_write_quorum,
                            config.desired_num_zones_per_write_quorum)
    if topology.mode is PlacementMode.REGION:
        region: Mapping[str, str] = topology.region
        return region_verdict(ensemble, write_quorum, ack_quorum,
                              lambda b: region.get(b) or region_of(topology.rack_of(b)),
                              topology.known, config.min_regions_for_durability)
    return rack_verdict(ensemble, write_quorum, topology.rack_of, topology.known,
                        config.min_num_racks_per_write_quorum,
                        config.enforce_min_num_racks_per_write_quorum,
                        topology.default_location)


def adherence(
    topology: Topology,
    ensemble: Sequence[str],
    write_quorum: int,
    ack_quorum: int,
    config: PlacementConfig,
) -> Adherence:
    """isEnsembleAdheringToPlacementPolicy for the topology's mode (no isolation groups)."""
    return fault_domain_verdict(topology, ensemble, write_quorum, ack_quorum, config)[0]


def acked_bookies_adhere(
    topology: Topology,
    acked: Sequence[str],
    write_quorum: int,
    ack_quorum: int,
    config: PlacementConfig,
) -> bool:
    """areAckedBookiesAdheringToPlacementPolicy (used with enforceMinNumFaultDomainsForWrite)."""
    known = [b for b in acked if b in topology.known]
    if topology.mode is PlacementMode.ZONE:
        zones = {split_zone(topology.rack_of(b))[0] for b in known}
        need = min(write_quorum, config.min_num_zones_per_write_quorum)
        return len(zones) >= need and len(set(acked)) >= ack_quorum
    racks = {topology.rack_of(b) for b in known}
    return len(racks) >= min(write_quorum, config.min_num_racks_per_write_quorum)
