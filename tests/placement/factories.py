"""Builders for placement tests: rack maps, topologies, configs, seeded rngs."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping

from placement import PlacementConfig, PlacementMode, Topology


def bid(i: int) -> str:
    return f"10.0.0.{i}:3181"


def rack_map(racks: Mapping[str, str], group: str = "default") -> dict[str, dict[str, dict]]:
    """{bookie: rack} -> the /bookies document with every bookie in `group`."""
    return {group: {b: {"rack": r} for b, r in racks.items()}}


def topology(
    racks: Mapping[str, str],
    writable: Iterable[str] | None = None,
    read_only: Iterable[str] = (),
    mode: PlacementMode = PlacementMode.RACK,
    weights: Mapping[str, float] | None = None,
    extra_writable: Iterable[str] = (),
) -> Topology:
    ids = list(racks) if writable is None else list(writable)
    return Topology.build(rack_map(racks), [*ids, *extra_writable], read_only, weights, mode)


def uniform_cluster(n: int, per_rack: int = 20, prefix: str = "/rack") -> Topology:
    racks = {f"bk{i}:3181": f"{prefix}{i // per_rack}" for i in range(n)}
    return topology(racks)


def config(**kw: object) -> PlacementConfig:
    return PlacementConfig(**kw)  # type: ignore[arg-type]


def rngs(count: int, base: int = 0) -> Iterable[random.Random]:
    for seed in range(base, base + count):
        yield random.Random(seed)
