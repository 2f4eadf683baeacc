"""`PlacementConfig`: the broker.conf / BookKeeper client keys placement reads.

Field names are the snake_case form of the Pulsar (`bookkeeperClient...`) or BookKeeper
(`repp...`, `...Zone...`) key; `from_broker_conf` reads the camelCase keys themselves.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from placement.errors import InvalidPlacementRequest


class PlacementMode(enum.StrEnum):
    """Which topology-aware policy places bookies (and how deep a location is)."""

    RACK = "rack-aware"  # /rack
    REGION = "region-aware"  # /region/rack
    ZONE = "zone-aware"  # /zone/upgradedomain


@dataclass(frozen=True, slots=True)
class PlacementConfig:
    """Placement settings; defaults are Pulsar's and BookKeeper's."""

    rackaware_policy_enabled: bool = True
    regionaware_policy_enabled: bool = False
    zoneaware_policy_enabled: bool = False  # extension: Pulsar has no broker key for it
    min_num_racks_per_write_quorum: int = 2
    enforce_min_num_racks_per_write_quorum: bool = False
    disk_weight_based_placement_enabled: bool = False
    bookie_max_multiple_for_weight_based_placement: int = 3
    isolation_groups: tuple[str, ...] = ()
    secondary_isolation_groups: tuple[str, ...] = ()
    strict_bookie_affinity_enabled: bool = False
    # Pulsar #12025 variant: ungrouped bookies are a last resort (False: always eligible).
    strict_unassigned_exclusion: bool = True
    # region-aware (BookKeeper repp* keys)
    regions_to_write: tuple[str, ...] = ()
    minimum_regions_for_durability: int = 2
    enable_durability_enforcement_in_replace: bool = True
    # zone-aware
    min_num_zones_per_write_quorum: int = 2
    desired_num_zones_per_write_quorum: int = 3
    enforce_strict_zoneaware_placement: bool = True
    # managed-ledger defaults, used when a namespace has no persistence policy
    managed_ledger_default_ensemble_size: int = 2
    managed_ledger_default_write_quorum: int = 2
    managed_ledger_default_ack_quorum: int = 2

    def __post_init__(self) -> None:
        if self.min_num_zones_per_write_quorum > self.desired_num_zones_per_write_quorum:
            raise InvalidPlacementRequest(
                "minNumZonesPerWriteQuorum "
                f"({self.min_num_zones_per_write_quorum}) > desiredNumZonesPerWriteQuorum "
                f"({self.desired_num_zones_per_write_quorum})"
            )
        if self.regions_to_write and (
            len(self.regions_to_write) < self.minimum_regions_for_durability
        ):
            raise InvalidPlacementRequest(
                f"reppRegionsToWrite lists {len(self.regions_to_write)} regions, fewer than "
                f"reppMinimumRegionsForDurability={self.minimum_regions_for_durability}"
            )

    @property
    def mode(self) -> PlacementMode:
        """Region-aware wins over rack-aware, as in BookKeeperClientFactoryImpl."""
        if self.zoneaware_policy_enabled:
            return PlacementMode.ZONE
        if self.regionaware_policy_enabled:
            return PlacementMode.REGION
        return PlacementMode.RACK

    @property
    def min_regions_for_durability(self) -> int:
        """0 unless `reppRegionsToWrite` is set (BookKeeper only reads the minimum then)."""
        return self.minimum_regions_for_durability if self.regions_to_write else 0

    @classmethod
    def from_broker_conf(cls, conf: Mapping[str, Any]) -> PlacementConfig:
        """Build from broker.conf keys (strings as read from the file, or typed values)."""
        kw: dict[str, Any] = {}
        for key, (field, kind) in _KEYS.items():
            if key in conf and conf[key] is not None:
                kw[field] = _convert(key, conf[key], kind)
        return cls(**kw)


_KEYS: dict[str, tuple[str, str]] = {
    "bookkeeperClientRackawarePolicyEnabled": ("rackaware_policy_enabled", "bool"),
    "bookkeeperClientRegionawarePolicyEnabled": ("regionaware_policy_enabled", "bool"),
    "bookkeeperClientZoneawarePolicyEnabled": ("zoneaware_policy_enabled", "bool"),
    "bookkeeperClientMinNumRacksPerWriteQuorum": ("min_num_racks_per_write_quorum", "int"),
    "bookkeeperClientEnforceMinNumRacksPerWriteQuorum": (
        "enforce_min_num_racks_per_write_quorum",
        "bool",
    ),
    "bookkeeperDiskWeightBasedPlacementEnabled": ("disk_weight_based_placement_enabled", "bool"),
    "bookieMaxMultipleForWeightBasedPlacement": (
        "bookie_max_multiple_for_weight_based_placement",
        "int",
    ),
    "bookkeeperClientIsolationGroups": ("isolation_groups", "list"),
    "bookkeeperClientSecondaryIsolationGroups": ("secondary_isolation_groups", "list"),
    "strictBookieAffinityEnabled": ("strict_bookie_affinity_enabled", "bool"),
    "reppRegionsToWrite": ("regions_to_write", "regions"),
    "reppMinimumRegionsForDurability": ("minimum_regions_for_durability", "int"),
    "reppEnableDurabilityEnforcementInReplace": (
        "enable_durability_enforcement_in_replace",
        "bool",
    ),
    "minNumZonesPerWriteQuorum": ("min_num_zones_per_write_quorum", "int"),
    "desiredNumZonesPerWriteQuorum": ("desired_num_zones_per_write_quorum", "int"),
    "enforceStrictZoneawarePlacement": ("enforce_strict_zoneaware_placement", "bool"),
    "managedLedgerDefaultEnsembleSize": ("managed_ledger_default_ensemble_size", "int"),
    "managedLedgerDefaultWriteQuorum": ("managed_ledger_default_write_quorum", "int"),
    "managedLedgerDefaultAckQuorum": ("managed_ledger_default_ack_quorum", "int"),
}


def split_groups(value: str | None) -> tuple[str, ...]:
    """Pulsar's comma-separated group list: trimmed, empties dropped, order kept."""
    if not value:
        return ()
    return tuple(g.strip() for g in value.split(",") if g.strip())


def _convert(key: str, value: Any, kind: str) -> Any:
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise InvalidPlacementRequest(f"{key}: expected true or false, got {value!r}")
    if kind == "int":
        try:
            return int(str(value).strip())
        except ValueError as exc:
            raise InvalidPlacementRequest(f"{key}: expected an integer, got {value!r}") from exc
    if isinstance(value, list | tuple):
        return tuple(str(v).strip() for v in value if str(v).strip())
    if kind == "regions":
        return tuple(r.strip() for r in str(value).split(";") if r.strip())
    return split_groups(str(value))
