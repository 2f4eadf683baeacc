import dataclasses

import pytest

from placement import PlacementMode, Topology
from placement.topology import DEFAULT_RACK, DEFAULT_REGION_RACK, DEFAULT_ZONE_UD, normalize_rack
from tests.factories import uniform_cluster


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("", None), ("/", None), ("  ", None), (None, None), ("rack1", "/rack1"),
     ("/rack1", "/rack1"), ("/rack1/", "/rack1"), (" /r2 ", "/r2")],
)
def test_normalize_rack(raw: object, expected: str | None) -> None:
    assert normalize_rack(raw) == expected


def test_build_from_stored_rack_map() -> None:
    doc = {
        "default": {"a:1": {"rack": "/r1", "hostname": "a"}, "b:1": {"rack": ""}},
        "ssd": {"c:1": {"rack": "r2"}, "d:1": {"rack": "/"}},
    }
    t = Topology.build(doc, ["a:1", "b:1", "c:1", "d:1", "e:1"], read_only=["f:1"])
    assert t.rack_of("a:1") == "/r1"
    assert t.rack_of("b:1") == DEFAULT_RACK
    assert t.rack_of("c:1") == "/r2"
    assert t.rack_of("d:1") == DEFAULT_RACK
    assert t.rack_of("e:1") == DEFAULT_RACK and t.group_of["e:1"] is None
    assert t.group_of["c:1"] == "ssd"
    assert t.bookies == ("a:1", "b:1", "c:1", "d:1", "e:1")
    assert "f:1" not in t.known and t.read_only == frozenset({"f:1"})
    assert t.by_rack[DEFAULT_RACK] == ("b:1", "d:1", "e:1")
    assert t.num_racks == 3
    assert t.bookies_in_group("ssd") == frozenset({"c:1", "d:1"})


def test_region_mode_defaults_and_bad_depth() -> None:
    doc = {"g": {"a:1": {"rack": "/east/r1"}, "b:1": {"rack": "/r1"}, "c:1": {"rack": ""}}}
    t = Topology.build(doc, ["a:1", "b:1", "c:1"], mode=PlacementMode.REGION)
    assert t.rack_of("c:1") == DEFAULT_REGION_RACK
    assert t.region["a:1"] == "east" and t.region["c:1"] == "UnknownRegion"
    assert "b:1" in t.unplaceable and "b:1" not in t.known
    assert "needs /region/rack" in t.unplaceable["b:1"]


def test_rack_mode_rejects_two_level_location() -> None:
    t = Topology.build({"g": {"a:1": {"rack": "/x/y"}}}, ["a:1"])
    assert "a:1" in t.unplaceable and t.bookies == ()


def test_zone_mode_unresolved_goes_to_default_fault_domain() -> None:
    doc = {"g": {"a:1": {"rack": "/z1/ud1"}, "b:1": {"rack": "/z1"}}}
    t = Topology.build(doc, ["a:1", "b:1"], mode=PlacementMode.ZONE)
    assert t.rack_of("b:1") == DEFAULT_ZONE_UD and "b:1" in t.known


def test_overlapping_groups_first_group_by_name_wins() -> None:
    doc = {"zeta": {"a:1": {"rack": "/z"}}, "alpha": {"a:1": {"rack": "/a"}}}
    t = Topology.build(doc, ["a:1"])
    assert t.group_of["a:1"] == "alpha" and t.rack_of("a:1") == "/a"
    assert t.bookies_in_group("zeta") == frozenset({"a:1"})


def test_topology_is_frozen() -> None:
    t = uniform_cluster(40)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.bookies = ()  # type: ignore[misc]


def test_restricted_view_is_memoised_and_keeps_reasons() -> None:
    t = uniform_cluster(40)
    keep = t.bookies[:5]
    v1 = t.restrict("k", keep, {b: "nope" for b in t.bookies[5:]})
    v2 = t.restrict("k", (), {})
    assert v1 is v2 and v1.bookies == keep
    assert v1.filtered[t.bookies[10]] == "nope"
