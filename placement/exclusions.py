"""Why each bookie was not in an ensemble: the data behind NotEnoughBookies and explain.

Reasons, in the order they are tested: not registered, read-only, unplaceable location,
filtered by isolation (the view's own reason), excluded by the caller, default rack under
enforcement, and finally a policy-specific reason for bookies that were eligible but not
chosen (same rack, not needed, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container

from placement.config import PlacementConfig, PlacementMode
from placement.topology import Topology

READ_ONLY = "read-only"
NOT_REGISTERED = "not registered (listed in the rack map only)"
EXCLUDED = "excluded by the caller"
NOT_NEEDED = "not needed"


def default_rack_reason(topology: Topology) -> str:
    return f"default rack {topology.default_location} under enforceMinNumRacksPerWriteQuorum"


def enforce_excludes_default(topology: Topology, config: PlacementConfig) -> bool:
    """Rack- and region-aware placement drop default-rack bookies under enforcement."""
    return (
        topology.mode is not PlacementMode.ZONE
        and config.enforce_min_num_racks_per_write_quorum
    )


def base_reason(
    topology: Topology, bookie: str, exclude: Container[str], config: PlacementConfig
) -> str | None:
    """Why `bookie` is not a candidate at all, or None if it is one."""
    if bookie in topology.read_only:
        return READ_ONLY
    if bookie not in topology.writable:
        return NOT_REGISTERED
    if bookie in topology.unplaceable:
        return topology.unplaceable[bookie]
    if bookie in topology.filtered:
        return topology.filtered[bookie]
    if bookie in exclude:
        return EXCLUDED
    if enforce_excludes_default(topology, config) and (
        topology.rack_of(bookie) == topology.default_location
    ):
        return default_rack_reason(topology)
    return None


def describe(
    topology: Topology,
    exclude: Container[str],
    config: PlacementConfig,
    chosen: Collection[str] = (),
    unchosen_reason: Callable[[str], str] | None = None,
) -> list[tuple[str, str]]:
    """(bookie, reason) for every bookie the topology has seen that is not in `chosen`."""
    out: list[tuple[str, str]] = []
    for bookie in sorted(topology.location):
        if bookie in chosen:
            continue
        reason = base_reason(topology, bookie, exclude, config)
        if reason is None:
            reason = unchosen_reason(bookie) if unchosen_reason else NOT_NEEDED
        out.append((bookie, reason))
    return out
