"""The snapshot's small tables turned into what placement/ reads.

`PlacementInputs` holds one `Topology` built from the `bookies` table exactly as the live
service builds it from `/bookies` and the registrations, the `PlacementConfig` of the
`config` row, each namespace's `AffinityGroups`, and the int-encoded forms of all three
(`BatchTopology`, `PolicyTable`) that the Spark workers receive as a broadcast.
Policy index `len(namespaces)` is "no namespace policy" (the broker defaults apply).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pyarrow as pa

from pipeline.schema import SnapshotError
from placement import AffinityGroups, PlacementConfig, PlacementMode, Topology
from placement.batch import BatchTopology, PolicyTable


@dataclass(frozen=True, eq=False)
class PlacementInputs:
    """Topology, config and namespace policies of one snapshot."""

    topology: Topology
    config: PlacementConfig
    bookie_ids: tuple[str, ...]
    namespaces: tuple[str, ...]
    affinities: tuple[AffinityGroups | None, ...]
    batch: BatchTopology
    policies: PolicyTable
    bookie_rows: tuple[Mapping[str, Any], ...]

    @property
    def default_policy(self) -> int:
        return len(self.namespaces)

    def policy_index(self) -> dict[str, int]:
        return {ns: i for i, ns in enumerate(self.namespaces)}

    def bookie_index(self) -> dict[str, int]:
        """bookie id -> index (computed once)."""
        return self._index

    @cached_property
    def _index(self) -> dict[str, int]:
        return {b: i for i, b in enumerate(self.bookie_ids)}

    def affinity(self, policy: int) -> AffinityGroups | None:
        return self.affinities[policy]

    def location_names(self) -> tuple[list[str], list[str]]:
        """Names of the rack and region indexes of `batch`."""
        from placement.topology import region_of

        locs = [self.topology.rack_of(b) for b in self.bookie_ids]
        return _names(self.batch.rack, locs), _names(self.batch.region,
                                                     [region_of(x) for x in locs])


def _names(index: Any, values: list[str]) -> list[str]:
    out = [""] * (int(index.max()) + 1 if len(index) else 0)
    for i, v in zip(index.tolist(), values, strict=True):
        out[i] = v
    return out


def build_placement_inputs(
    bookies: pa.Table, policies: pa.Table, config: pa.Table
) -> PlacementInputs:
    """From the three small tables of a snapshot (schemas of pipeline.schema)."""
    cfg = placement_config(config)
    rows = sorted(bookies.to_pylist(), key=lambda r: r["bookie_index"])
    if [r["bookie_index"] for r in rows] != list(range(len(rows))):
        raise SnapshotError("table 'bookies': bookie_index must be 0..n-1, each once")
    rack_map: dict[str, dict[str, dict[str, str]]] = {}
    for r in rows:
        if r["group"] is not None:
            info = {"rack": r["rack"] or "", "hostname": r["hostname"] or ""}
            rack_map.setdefault(r["group"], {})[r["bookie_id"]] = info
    writable = [r["bookie_id"] for r in rows if r["registered"] and not r["read_only"]]
    read_only = [r["bookie_id"] for r in rows if r["registered"] and r["read_only"]]
    topology = Topology.build(rack_map, writable, read_only, mode=cfg.mode)
    ids = tuple(r["bookie_id"] for r in rows)
    batch = BatchTopology.from_topology(topology, ids, sorted(rack_map))
    namespaces: list[str] = []
    affinities: list[AffinityGroups | None] = []
    for p in policies.to_pylist():
        namespaces.append(p["namespace"])
        if p["primary_groups"] is None:  # a row for its persistence only: broker defaults
            affinities.append(None)
            continue
        affinities.append(AffinityGroups(tuple(p["primary_groups"]),
                                         tuple(p["secondary_groups"] or ()), bool(p["strict"])))
    affinities.append(None)
    return PlacementInputs(topology, cfg, ids, tuple(namespaces), tuple(affinities), batch,
                   PolicyTable.build(affinities, cfg, batch.groups), tuple(rows))


def placement_config(config: pa.Table) -> PlacementConfig:
    """The PlacementConfig of the single `config` row."""
    if config.num_rows != 1:
        raise SnapshotError(f"table 'config' must hold exactly one row, has {config.num_rows}")
    row = config.to_pylist()[0]
    try:
        mode = PlacementMode(row["placement_mode"])
    except ValueError:
        raise SnapshotError(f"table 'config': placement_mode {row['placement_mode']!r} is not "
                            f"one of {[m.value for m in PlacementMode]}") from None
    return PlacementConfig(
        rackaware_policy_enabled=True,
        regionaware_policy_enabled=mode is PlacementMode.REGION,
        zoneaware_policy_enabled=mode is PlacementMode.ZONE,
        min_num_racks_per_write_quorum=row["min_racks"],
        enforce_min_num_racks_per_write_quorum=bool(row["enforce_min_racks"]),
        strict_bookie_affinity_enabled=bool(row["strict_bookie_affinity"]),
        isolation_groups=tuple(row["isolation_groups"] or ()),
        secondary_isolation_groups=tuple(row["secondary_isolation_groups"] or ()),
        regions_to_write=tuple(row["regions_to_write"] or ()),
        minimum_regions_for_durability=row["min_regions"] or 2,
    )
