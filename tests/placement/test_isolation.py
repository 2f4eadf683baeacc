"""Isolation groups: Pulsar's policy (§6.5, pulsar-admin-api §4.4) and the strict extension."""

import random

import pytest

from placement import (
    Adherence,
    AffinityGroups,
    EnsembleRequest,
    NotEnoughBookies,
    PlacementConfig,
    Source,
    Topology,
    adherence,
    explain,
    new_ensemble,
    replace_bookie,
    replace_to_adhere,
)
from tests.factories import rngs

REQ = EnsembleRequest(3, 3, 2)


def b(i: int) -> str:
    return f"bk{i}:3181"


def seed_topology(writable: range | list[int] = range(1, 16)) -> Topology:
    """Bookies 1-5 in `default`, 6-10 in `share`, 11-15 without rack info."""
    doc = {
        "default": {b(i): {"rack": f"/r{i % 3}"} for i in range(1, 6)},
        "share": {b(i): {"rack": f"/r{i % 3}"} for i in range(6, 11)},
    }
    return Topology.build(doc, [b(i) for i in writable])


SHARE = {b(i) for i in range(6, 11)}
UNGROUPED = {b(i) for i in range(11, 16)}


def test_seed_strict_never_picks_ungrouped() -> None:
    t = seed_topology()
    groups = AffinityGroups(("share",), strict=True)
    for rng in rngs(300):
        p = new_ensemble(t, REQ, PlacementConfig(), rng, affinity=groups)
        assert set(p.ensemble) <= SHARE
        assert all(c.source is Source.PRIMARY and c.group == "share" for c in p.bookies)


def test_seed_strict_fails_clearly_when_share_is_short() -> None:
    t = seed_topology([*range(1, 8), *range(11, 16)])  # share has only bk6, bk7 writable
    groups = AffinityGroups(("share",), strict=True)
    with pytest.raises(NotEnoughBookies) as info:
        new_ensemble(t, REQ, PlacementConfig(), random.Random(0), affinity=groups)
    exc = info.value
    assert exc.group_counts == {"share": 2}
    assert (exc.needed, exc.available) == (3, 2)
    assert "'share'" in exc.short_set and "strict" in exc.short_set
    reasons = dict(exc.excluded)
    assert all(reasons[u] == "ungrouped, not allowed under strict isolation" for u in UNGROUPED)
    assert reasons[b(1)] == "other group 'default'"
    assert "'share' has 2 writable" in str(exc)


def test_seed_non_strict_falls_back_to_ungrouped_as_upstream() -> None:
    t = seed_topology([*range(1, 8), *range(11, 16)])
    groups = AffinityGroups(("share",))
    for rng in rngs(200):
        p = new_ensemble(t, REQ, PlacementConfig(), rng, affinity=groups)
        assert set(p.ensemble) <= {b(6), b(7)} | UNGROUPED
        assert not set(p.ensemble) & {b(i) for i in range(1, 6)}
        sources = {c.bookie_id: c.source for c in p.bookies}
        assert all(sources[x] is Source.UNGROUPED for x in set(p.ensemble) & UNGROUPED)


def test_non_strict_uses_only_primary_when_it_has_enough() -> None:
    t = seed_topology()
    for rng in rngs(200):
        p = new_ensemble(t, REQ, PlacementConfig(), rng, affinity=AffinityGroups(("share",)))
        assert set(p.ensemble) <= SHARE


def test_classic_variant_always_allows_ungrouped() -> None:
    t = seed_topology()
    cfg = PlacementConfig(strict_unassigned_exclusion=False)
    seen: set[str] = set()
    for rng in rngs(300):
        seen |= set(new_ensemble(t, REQ, cfg, rng, affinity=AffinityGroups(("share",))).ensemble)
    assert seen & UNGROUPED and not seen & {b(i) for i in range(1, 6)}


def test_upstream_testBasic() -> None:
    doc = {"group1": {"B1:1": {"rack": "/r1"}, "B2:1": {"rack": "/r2"}},
           "group2": {"B3:1": {"rack": "/r3"}}}
    t = Topology.build(doc, ["B1:1", "B2:1", "B3:1", "B4:1"])
    cfg = PlacementConfig(strict_unassigned_exclusion=False)
    g = AffinityGroups(("group1",))
    for rng in rngs(50):
        p = new_ensemble(t, EnsembleRequest(3, 2, 2), cfg, rng, affinity=g)
        assert set(p.ensemble) == {"B1:1", "B2:1", "B4:1"}
        assert "B3:1" not in new_ensemble(t, EnsembleRequest(1, 1, 1), cfg, rng, affinity=g
                                          ).ensemble
        p2 = new_ensemble(t, EnsembleRequest(2, 2, 2), cfg, rng, exclude={"B1:1"}, affinity=g)
        assert set(p2.ensemble) == {"B2:1", "B4:1"}
    with pytest.raises(NotEnoughBookies):
        new_ensemble(t, EnsembleRequest(4, 2, 2), cfg, random.Random(0), affinity=g)


def test_secondary_groups_used_only_when_primary_is_short() -> None:
    doc = {"p": {"p1:1": {"rack": "/r1"}, "p2:1": {"rack": "/r2"}},
           "s": {"s1:1": {"rack": "/r1"}, "s2:1": {"rack": "/r3"}},
           "o": {"o1:1": {"rack": "/r4"}}}
    t = Topology.build(doc, ["p1:1", "p2:1", "s1:1", "s2:1", "o1:1"])
    g = AffinityGroups(("p",), ("s",))
    for rng in rngs(100):
        two = new_ensemble(t, EnsembleRequest(2, 2, 2), PlacementConfig(), rng, affinity=g)
        assert set(two.ensemble) == {"p1:1", "p2:1"}
        three = new_ensemble(t, REQ, PlacementConfig(), rng, affinity=g)
        assert "o1:1" not in three.ensemble
        assert {c.source for c in three.bookies} == {Source.PRIMARY, Source.SECONDARY}


def test_secondary_negative_primary_has_one_bookie() -> None:
    doc = {"p": {"p1:1": {"rack": "/r1"}}, "o": {f"o{i}:1": {"rack": f"/r{i}"} for i in range(4)}}
    t = Topology.build(doc, ["p1:1", *(f"o{i}:1" for i in range(4))])
    with pytest.raises(NotEnoughBookies):
        new_ensemble(t, REQ, PlacementConfig(), random.Random(0), affinity=AffinityGroups(("p",)))


def test_star_primary_disables_isolation() -> None:
    t = seed_topology()
    seen: set[str] = set()
    for rng in rngs(300):
        p = new_ensemble(t, REQ, PlacementConfig(), rng, affinity=AffinityGroups(("*",)))
        seen |= set(p.ensemble)
        assert all(c.source is Source.ANY for c in p.bookies)
    assert seen & {b(1), b(2), b(3), b(4), b(5)} and seen & SHARE


def test_broker_default_groups_apply_without_namespace_group() -> None:
    t = seed_topology()
    cfg = PlacementConfig.from_broker_conf({"bookkeeperClientIsolationGroups": "share"})
    for rng in rngs(100):
        assert set(new_ensemble(t, REQ, cfg, rng).ensemble) <= SHARE


def test_strict_bookie_affinity_enabled_keeps_grouped_bookies_reserved() -> None:
    t = seed_topology()
    cfg = PlacementConfig.from_broker_conf({"strictBookieAffinityEnabled": "true"})
    for rng in rngs(200):
        p = new_ensemble(t, REQ, cfg, rng)
        assert set(p.ensemble) <= UNGROUPED


def test_strict_mode_still_applies_rack_rules() -> None:
    doc = {"g": {"a:1": {"rack": "/r1"}, "b:1": {"rack": "/r1"}, "c:1": {"rack": "/r2"},
                 "d:1": {"rack": "/r2"}}}
    t = Topology.build(doc, ["a:1", "b:1", "c:1", "d:1", "u:1", "v:1"])
    g = AffinityGroups(("g",), strict=True)
    cfg = PlacementConfig(min_num_racks_per_write_quorum=2,
                          enforce_min_num_racks_per_write_quorum=True)
    for rng in rngs(100):
        p = new_ensemble(t, EnsembleRequest(2, 2, 2), cfg, rng, affinity=g)
        assert len({t.rack_of(x) for x in p.ensemble}) == 2
    cfg3 = PlacementConfig(min_num_racks_per_write_quorum=3,
                           enforce_min_num_racks_per_write_quorum=True)
    with pytest.raises(NotEnoughBookies) as info:
        new_ensemble(t, REQ, cfg3, random.Random(0), affinity=g)
    assert info.value.group_counts == {"g": 4}


def test_from_json_reads_strict_field() -> None:
    g = AffinityGroups.from_json({"bookkeeperAffinityGroupPrimary": "a, b",
                                  "bookkeeperAffinityGroupSecondary": "c",
                                  "bookkeeperAffinityGroupStrict": True})
    assert g == AffinityGroups(("a", "b"), ("c",), True)
    assert AffinityGroups.from_json({"bookkeeperAffinityGroupPrimary": "a"}).strict is False


def test_replace_stays_inside_allowed_groups() -> None:
    t = seed_topology()
    g = AffinityGroups(("share",), strict=True)
    ens = (b(6), b(7), b(8))
    for rng in rngs(100):
        p = replace_bookie(t, REQ, PlacementConfig(), rng, ensemble=ens, bookie=b(6), affinity=g)
        assert p.replacement in {b(9), b(10)}


def test_adherence_fails_for_bookie_outside_groups() -> None:
    t = seed_topology()
    g = AffinityGroups(("share",), strict=True)
    cfg = PlacementConfig()
    assert adherence(t, (b(6), b(7), b(11)), 3, 2, cfg, affinity=g) is Adherence.FAIL
    assert adherence(t, (b(6), b(7), b(8)), 3, 2, cfg, affinity=g) is Adherence.MEETS_STRICT


def test_explain_lists_ensemble_and_exclusions() -> None:
    t = seed_topology()
    ex = explain(t, REQ, PlacementConfig(), random.Random(0),
                 affinity=AffinityGroups(("share",), strict=True))
    assert {e.bookie_id for e in ex.placement.bookies} <= SHARE
    assert all(e.group and e.rack and e.source for e in ex.placement.bookies)
    reasons = {e.bookie_id: e.reason for e in ex.excluded}
    assert reasons[b(1)] == "other group 'default'"
    assert reasons[b(12)].startswith("ungrouped")
    assert len(ex.placement.bookies) + len(ex.excluded) == 15
    assert ex.placement.adherence is Adherence.MEETS_STRICT
    assert ex.groups is not None and ex.groups.strict is True


def test_replace_to_adhere_replaces_a_foreign_member_even_when_racks_hold() -> None:
    """A member of another group (or ungrouped under strict) leaves, inside the groups,
    although the ensemble spans enough racks with it; the others stay."""
    t = seed_topology()
    g = AffinityGroups(("share",), strict=True)
    cfg = PlacementConfig()
    for foreign in (b(1), b(11)):  # another group's bookie, an ungrouped one
        ens = (b(6), b(7), foreign)
        for rng in rngs(50):
            p = replace_to_adhere(t, REQ, cfg, rng, ensemble=ens, affinity=g)
            assert p.ensemble[:2] == ens[:2] and p.ensemble[2] in SHARE - {b(6), b(7)}
            assert p.adherence is not Adherence.FAIL


def test_replace_to_adhere_without_an_allowed_spare_gives_no_ensemble() -> None:
    t = seed_topology([1, 6, 7, 8])  # share: bk6-8 writable only
    g = AffinityGroups(("share",), strict=True)
    p = replace_to_adhere(t, REQ, PlacementConfig(), random.Random(0),
                          ensemble=(b(6), b(7), b(1)), affinity=g)
    assert p.ensemble == (b(6), b(7), b(8))
    t = seed_topology([1, 6, 7])
    p = replace_to_adhere(t, REQ, PlacementConfig(), random.Random(0),
                          ensemble=(b(6), b(7), b(1)), affinity=g)
    assert p.ensemble == () and p.adherence is Adherence.FAIL
    assert "'share'" in p.reasons[0]
