"""The seam every placement policy module implements, and the choice by mode."""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from typing import Protocol

from placement.config import PlacementConfig, PlacementMode
from placement.model import Adherence, EnsembleRequest, Placement
from placement.topology import Topology


class Policy(Protocol):
    """What rackaware, regionaware and zoneaware each provide (module-level functions)."""

    def new_ensemble(
        self, topology: Topology, request: EnsembleRequest, config: PlacementConfig,
        rng: random.Random, exclude: Collection[str] = ...,
    ) -> Placement: ...

    def replace_bookie(
        self, topology: Topology, request: EnsembleRequest, config: PlacementConfig,
        rng: random.Random, ensemble: Sequence[str], bookie: str,
        exclude: Collection[str] = ...,
    ) -> Placement: ...

    def replace_to_adhere(
        self, topology: Topology, request: EnsembleRequest, config: PlacementConfig,
        rng: random.Random, ensemble: Sequence[str], exclude: Collection[str] = ...,
    ) -> Placement: ...

    def adherence(
        self, topology: Topology, ensemble: Sequence[str], write_quorum: int,
        ack_quorum: int, config: PlacementConfig,
    ) -> Adherence: ...


_TABLE: dict[PlacementMode, Policy] = {}


def for_mode(mode: PlacementMode) -> Policy:
    """The policy module for a topology's mode."""
    if not _TABLE:  # imported late: the policy modules import this one
        from placement import rackaware, regionaware, zoneaware

        _TABLE.update({PlacementMode.RACK: rackaware, PlacementMode.REGION: regionaware,
                       PlacementMode.ZONE: zoneaware})
    return _TABLE[mode]
