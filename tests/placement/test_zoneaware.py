"""Zone-aware placement (§4)."""

import pytest

from placement import (
    Adherence,
    EnsembleRequest,
    InvalidPlacementRequest,
    PlacementConfig,
    PlacementMode,
    Topology,
    new_ensemble,
    replace_bookie,
)
from tests.factories import rngs

CFG = PlacementConfig(zoneaware_policy_enabled=True)


def zones(nz: int, nud: int, extra_default: int = 0) -> Topology:
    doc = {"g": {f"z{z}u{u}:1": {"rack": f"/z{z}/u{u}"} for z in range(nz) for u in range(nud)}}
    ids = [*doc["g"], *(f"d{i}:1" for i in range(extra_default))]
    return Topology.build(doc, ids, mode=PlacementMode.ZONE)


def test_strict_spreads_each_write_quorum_over_desired_zones() -> None:
    t = zones(4, 2, extra_default=3)
    for rng in rngs(100):
        p = new_ensemble(t, EnsembleRequest(6, 3, 2), CFG, rng)
        assert p.adherence is Adherence.MEETS_STRICT
        assert not any(b.startswith("d") for b in p.ensemble)


def test_two_zones_give_soft_adherence() -> None:
    t = zones(2, 3)
    for rng in rngs(50):
        p = new_ensemble(t, EnsembleRequest(3, 3, 2), CFG, rng)
        assert p.adherence is Adherence.MEETS_SOFT


def test_strict_argument_checks() -> None:
    t = zones(4, 2)
    with pytest.raises(InvalidPlacementRequest):
        new_ensemble(t, EnsembleRequest(4, 3, 2), CFG, next(iter(rngs(1))))
    with pytest.raises(InvalidPlacementRequest):
        new_ensemble(t, EnsembleRequest(2, 2, 2), CFG, next(iter(rngs(1))))


def test_non_strict_is_random_and_graded() -> None:
    cfg = PlacementConfig(zoneaware_policy_enabled=True, enforce_strict_zoneaware_placement=False)
    t = zones(1, 3, extra_default=2)
    p = new_ensemble(t, EnsembleRequest(4, 2, 2), cfg, next(iter(rngs(1))))
    assert len(set(p.ensemble)) == 4 and p.adherence is Adherence.FAIL


def test_replace_keeps_zone_spread() -> None:
    t = zones(4, 2)
    ens = ("z0u0:1", "z1u0:1", "z2u0:1")
    for rng in rngs(50):
        p = replace_bookie(t, EnsembleRequest(3, 3, 2), CFG, rng, ensemble=ens, bookie="z0u0:1")
        assert p.replacement is not None and p.adherence is Adherence.MEETS_STRICT
        assert p.replacement not in ens
