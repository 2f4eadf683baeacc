"""The shared adherence predicate (§2.5, §4.3, AuditorPlacementPolicyCheckTest)."""

from placement import Adherence, PlacementConfig, PlacementMode, Topology, adherence
from tests.factories import topology


def test_auditor_example_window_with_two_racks_fails_min_three() -> None:
    racks = {"b1:1": "/r1", "b2:1": "/r2", "b3:1": "/r3", "b4:1": "/r1", "b5:1": "/r2"}
    t = topology(racks)
    ens = ("b1:1", "b2:1", "b3:1", "b4:1", "b5:1")
    cfg = PlacementConfig(min_num_racks_per_write_quorum=3)
    assert adherence(t, ens, 3, 2, cfg) is Adherence.FAIL  # window (3,4,0) = r1,r2,r1
    assert adherence(t, ens, 3, 2, PlacementConfig()) is Adherence.MEETS_STRICT


def test_unknown_bookies_do_not_count_and_empty_fails() -> None:
    t = topology({"a:1": "/r1", "b:1": "/r2"}, writable=["a:1"])
    assert adherence(t, ("a:1", "b:1"), 2, 2, PlacementConfig()) is Adherence.FAIL
    assert adherence(t, (), 2, 2, PlacementConfig()) is Adherence.FAIL


def test_enforce_fails_default_rack_member() -> None:
    t = topology({"a:1": "/r1", "b:1": "/r2"}, extra_writable=["c:1"])
    cfg = PlacementConfig(enforce_min_num_racks_per_write_quorum=True)
    assert adherence(t, ("a:1", "c:1"), 2, 2, cfg) is Adherence.FAIL
    assert adherence(t, ("a:1", "c:1"), 2, 2, PlacementConfig()) is Adherence.MEETS_STRICT


def zone_topo() -> Topology:
    doc = {"g": {"a:1": {"rack": "/z1/u1"}, "b:1": {"rack": "/z2/u1"}, "c:1": {"rack": "/z3/u1"},
                 "d:1": {"rack": "/z1/u2"}, "e:1": {"rack": "/z1/u1"}, "f:1": {"rack": "/z9"}}}
    return Topology.build(doc, ["a:1", "b:1", "c:1", "d:1", "e:1", "f:1"],
                          mode=PlacementMode.ZONE)


def test_zone_strict_soft_and_fail() -> None:
    t = zone_topo()
    cfg = PlacementConfig(zoneaware_policy_enabled=True)
    assert adherence(t, ("a:1", "b:1", "c:1"), 3, 2, cfg) is Adherence.MEETS_STRICT
    assert adherence(t, ("a:1", "d:1", "b:1"), 3, 2, cfg) is Adherence.MEETS_SOFT
    assert adherence(t, ("a:1", "e:1", "b:1"), 3, 2, cfg) is Adherence.FAIL  # same zone+UD
    assert adherence(t, ("a:1", "b:1", "f:1"), 3, 2, cfg) is Adherence.FAIL  # default domain
    assert adherence(t, ("a:1", "b:1"), 2, 2, cfg) is Adherence.FAIL  # Qw <= minZones


def test_region_durability() -> None:
    doc = {"g": {f"{r}{i}:1": {"rack": f"/{r}/k{i}"} for r in "xyz" for i in range(2)}}
    t = Topology.build(doc, list(doc["g"]), mode=PlacementMode.REGION)
    cfg = PlacementConfig(regionaware_policy_enabled=True, regions_to_write=("x", "y", "z"))
    good = ("x0:1", "x1:1", "y0:1", "y1:1", "z0:1", "z1:1")
    assert adherence(t, good, 6, 4, cfg) is Adherence.MEETS_STRICT
    assert adherence(t, ("x0:1", "x1:1", "y0:1"), 3, 2, cfg) is Adherence.FAIL
