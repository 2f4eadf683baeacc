"""Lint: configuration that silently weakens placement, as a list of warnings (pure).

Each warning has a stable `kind` (see `KINDS`) and a readable `message`, plus the bookie,
group or namespace it is about. Inputs are plain data: the rack map as stored, the registered
bookie ids, the Topology built from them, the config, and each namespace's affinity groups
with its ensemble size.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from placement.config import PlacementConfig
from placement.isolation import AffinityGroups
from placement.topology import RackMap, Topology, normalize_rack

UNRACKED = "unracked-bookie"
STALE_RACK_ENTRY = "unregistered-rack-entry"
INVALID_ID = "invalid-bookie-id"
DEPTH_MISMATCH = "rack-depth-mismatch"
EMPTY_GROUP = "empty-affinity-group"
SMALL_GROUP = "affinity-group-too-small"
TOO_FEW_RACKS = "too-few-racks"
DEFAULT_RACK = "default-rack"

KINDS: dict[str, str] = {
    UNRACKED: "a registered bookie has no entry in the rack map: it is placed on the default "
    "rack and, under isolation, counts as ungrouped",
    STALE_RACK_ENTRY: "the rack map lists a bookie that is not registered (stale or mistyped "
    "key)",
    INVALID_ID: "a bookie id (registered or in the rack map) is not in host:port form",
    DEPTH_MISMATCH: "a rack has the wrong number of levels for the placement mode (/rack for "
    "rack-aware, /region/rack for region-aware): the bookie cannot be placed",
    EMPTY_GROUP: "a namespace's bookie affinity group has no bookies in the rack map",
    SMALL_GROUP: "a namespace's primary affinity groups have fewer writable bookies than its "
    "ensemble size (ledgers fall back to secondary or ungrouped bookies, or fail when strict)",
    TOO_FEW_RACKS: "the writable bookies span fewer racks than "
    "bookkeeperClientMinNumRacksPerWriteQuorum",
    DEFAULT_RACK: "a writable bookie listed in the rack map resolves to the default rack "
    "(empty rack, '/', or the default rack named explicitly)",
}

HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^:/\s]+):([0-9]{1,5})$")


@dataclass(frozen=True, slots=True)
class LintWarning:
    kind: str
    message: str
    bookie_id: str | None = None
    group: str | None = None
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class NamespaceGroups:
    """A namespace's own bookie affinity groups and the ensemble size of its ledgers."""

    namespace: str
    groups: AffinityGroups
    ensemble_size: int


def is_host_port(bookie_id: str) -> bool:
    found = HOST_PORT.match(bookie_id)
    return found is not None and 0 < int(found.group(2)) < 65536


def lint(
    topology: Topology,
    rack_map: RackMap,
    registered: frozenset[str],
    config: PlacementConfig,
    *,
    namespaces: Iterable[NamespaceGroups] = (),
) -> list[LintWarning]:
    """Every warning, bookies first, then racks, then namespaces in the order given."""
    found = [*bookie_warnings(topology, rack_map, registered), *rack_warnings(topology, config)]
    for namespace in namespaces:
        found.extend(group_warnings(topology, namespace))
    return found


def bookie_warnings(
    topo: Topology, rack_map: RackMap, registered: frozenset[str]
) -> Iterator[LintWarning]:
    listed: dict[str, tuple[str, Any]] = {}
    for group in sorted(rack_map):
        for bookie, info in rack_map[group].items():
            listed.setdefault(bookie, (group, info))
    for bookie in sorted(registered | set(listed)):
        if not is_host_port(bookie):
            yield LintWarning(INVALID_ID, f"Bookie id '{bookie}' is not in host:port form",
                              bookie_id=bookie)  # fmt: skip
    for bookie in sorted(registered - set(listed)):
        yield LintWarning(UNRACKED, f"Bookie {bookie} is registered but has no rack information; "
                          f"it is placed on {topo.default_location}", bookie_id=bookie)  # fmt: skip
    for bookie in sorted(set(listed) - registered):
        group = listed[bookie][0]
        yield LintWarning(STALE_RACK_ENTRY, f"Rack map lists bookie {bookie} (group '{group}') "
                          "but it is not registered", bookie_id=bookie, group=group)  # fmt: skip
    for bookie, reason in sorted(topo.unplaceable.items()):
        yield LintWarning(DEPTH_MISMATCH, f"Bookie {bookie}: {reason}", bookie_id=bookie,
                          group=listed.get(bookie, (None,))[0])  # fmt: skip
    for bookie in sorted(topo.writable & set(listed)):
        if bookie in topo.unplaceable or topo.rack_of(bookie) != topo.default_location:
            continue
        group, info = listed[bookie]
        rack = info.get("rack") if isinstance(info, Mapping) else None
        shown = "no rack" if normalize_rack(rack) is None else f"rack '{rack}'"
        yield LintWarning(DEFAULT_RACK, f"Bookie {bookie} has {shown} and resolves to the "
                          f"default rack {topo.default_location}", bookie_id=bookie,
                          group=group)  # fmt: skip


def rack_warnings(topology: Topology, config: PlacementConfig) -> Iterator[LintWarning]:
    racks = topology.num_racks
    wanted = config.min_num_racks_per_write_quorum
    if topology.bookies and racks < wanted:
        yield LintWarning(TOO_FEW_RACKS, f"Writable bookies span {racks} rack(s), fewer than "
                          f"bookkeeperClientMinNumRacksPerWriteQuorum={wanted}")  # fmt: skip


def group_warnings(topo: Topology, of: NamespaceGroups) -> Iterator[LintWarning]:
    groups, namespace = of.groups, of.namespace
    if groups.disables_isolation:
        return
    for group in (*groups.primary, *groups.secondary):
        if not topo.bookies_in_group(group):
            yield LintWarning(EMPTY_GROUP, f"Namespace {namespace} uses bookie affinity group "
                              f"'{group}', which has no bookies", group=group,
                              namespace=namespace)  # fmt: skip
    writable = {b for g in groups.primary for b in topo.bookies_in_group(g) if topo.is_known(b)}
    primary = ",".join(groups.primary)
    if groups.primary and len(writable) < of.ensemble_size and any(
        topo.bookies_in_group(g) for g in groups.primary
    ):
        yield LintWarning(SMALL_GROUP, f"Namespace {namespace}: primary group '{primary}' has "
                          f"{len(writable)} writable bookie(s), fewer than its ensemble size "
                          f"{of.ensemble_size}", group=primary, namespace=namespace)  # fmt: skip
