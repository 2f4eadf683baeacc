"""Region-aware placement (§3)."""

import random
from collections import Counter

import pytest

from placement import (
    EnsembleRequest,
    InvalidPlacementRequest,
    NotEnoughBookies,
    PlacementConfig,
    PlacementMode,
    Topology,
    new_ensemble,
    replace_bookie,
)
from tests.factories import rngs


def regions(sizes: dict[str, int]) -> Topology:
    doc = {"g": {f"{r}-{i}:1": {"rack": f"/{r}/rack{i % 2}"}
                 for r, n in sizes.items() for i in range(n)}}
    return Topology.build(doc, list(doc["g"]), mode=PlacementMode.REGION)


def region(t: Topology, b: str) -> str:
    return t.region[b]


def test_seed_four_regions_give_three_regions() -> None:
    t = regions({"r1": 3, "r2": 3, "r3": 3, "r4": 3})
    cfg = PlacementConfig(regionaware_policy_enabled=True)
    for rng in rngs(200):
        p = new_ensemble(t, EnsembleRequest(3, 3, 2), cfg, rng)
        assert len({region(t, b) for b in p.ensemble}) == 3


def test_regions_are_contiguous_blocks_and_small_region_fully_used() -> None:
    t = regions({"a": 4, "b": 4, "c": 2})
    cfg = PlacementConfig(regionaware_policy_enabled=True)
    for e in range(6, 10):
        for rng in rngs(30):
            p = new_ensemble(t, EnsembleRequest(e, e, e), cfg, rng)
            seq = [region(t, b) for b in p.ensemble]
            assert Counter(seq)["c"] == 2
            blocks = [r for i, r in enumerate(seq) if i == 0 or seq[i - 1] != r]
            assert len(blocks) == len(set(blocks))


def test_durability_rule_with_regions_to_write() -> None:
    t = regions({"x": 3, "y": 3, "z": 3})
    cfg = PlacementConfig(regionaware_policy_enabled=True, regions_to_write=("x", "y", "z"))
    for rng in rngs(50):
        p = new_ensemble(t, EnsembleRequest(6, 6, 4), cfg, rng)
        counts = Counter(region(t, b) for b in p.ensemble)
        assert max(counts.values()) <= 3


def test_degraded_mode_argument_checks() -> None:
    t = regions({"x": 3, "y": 3})
    cfg = PlacementConfig(regionaware_policy_enabled=True, regions_to_write=("x", "y"))
    with pytest.raises(InvalidPlacementRequest):
        new_ensemble(t, EnsembleRequest(6, 6, 3), cfg, random.Random(0))  # needs Qa >= 4
    with pytest.raises(InvalidPlacementRequest):
        new_ensemble(t, EnsembleRequest(3, 3, 1), cfg, random.Random(0))  # Qa < d


def test_one_region_down_with_three_way_durability_fails() -> None:
    doc = {"g": {f"{r}-{i}:1": {"rack": f"/{r}/k{i}"} for r in "xyz" for i in range(3)}}
    alive = [b for b in doc["g"] if not b.startswith("z")]
    t = Topology.build(doc, alive, mode=PlacementMode.REGION)
    cfg = PlacementConfig(regionaware_policy_enabled=True, regions_to_write=("x", "y", "z"),
                          minimum_regions_for_durability=3)
    with pytest.raises(NotEnoughBookies):
        new_ensemble(t, EnsembleRequest(6, 6, 5), cfg, random.Random(0))


def test_replace_prefers_same_region() -> None:
    t = regions({"x": 3, "y": 3, "z": 3})
    cfg = PlacementConfig(regionaware_policy_enabled=True)
    ens = ("x-0:1", "x-1:1", "y-0:1", "y-1:1", "z-0:1", "z-1:1")
    for rng in rngs(30):
        p = replace_bookie(t, EnsembleRequest(6, 6, 4), cfg, rng, ensemble=ens, bookie="y-0:1")
        assert p.replacement == "y-2:1"
