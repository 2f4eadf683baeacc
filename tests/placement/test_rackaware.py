"""Rack-aware placement, from placement.md §2 and TestRackawareEnsemblePlacementPolicy."""

import random
from collections import Counter

import pytest

from placement import (
    Adherence,
    EnsembleRequest,
    InvalidPlacementRequest,
    NotEnoughBookies,
    rackaware,
)
from placement.topology import DEFAULT_RACK
from tests.factories import bid, config, rngs, topology

REQ_332 = EnsembleRequest(3, 3, 2)


def thirteen_in_four_racks() -> dict[str, str]:
    # racks of 4, 3, 3, 3 bookies
    return {bid(i): f"/rack{1 + (i - 1) % 4}" for i in range(1, 14)}


def test_seed_13_bookies_4_racks_always_span_3_racks() -> None:
    t = topology(thirteen_in_four_racks())
    for rng in rngs(500):
        p = rackaware.new_ensemble(t, REQ_332, config(), rng)
        assert len({t.rack_of(b) for b in p.ensemble}) == 3
        assert len(set(p.ensemble)) == 3
        assert p.adherence is Adherence.MEETS_STRICT


def test_seed_enforce_min_racks_with_racks_3_and_4_gone() -> None:
    racks = thirteen_in_four_racks()
    alive = [b for b, r in racks.items() if r in ("/rack1", "/rack2")]
    t = topology(racks, writable=alive)
    with pytest.raises(NotEnoughBookies) as info:
        rackaware.new_ensemble(t, REQ_332, config(min_num_racks_per_write_quorum=3,
                                                  enforce_min_num_racks_per_write_quorum=True),
                               random.Random(1))
    exc = info.value
    assert (exc.needed, exc.available, exc.shortfall) == (3, 2, 1)
    assert "racks" in exc.short_set
    assert "needs 3" in str(exc)
    assert {r for _, r in exc.excluded} >= {"not registered (listed in the rack map only)"}
    cfg2 = config(min_num_racks_per_write_quorum=2, enforce_min_num_racks_per_write_quorum=True)
    for rng in rngs(200):
        p = rackaware.new_ensemble(t, REQ_332, cfg2, rng)
        assert len({t.rack_of(b) for b in p.ensemble}) == 2
        assert p.adherence is Adherence.MEETS_STRICT


def test_three_racks_e3_never_two_bookies_in_one_rack() -> None:
    t = topology({bid(i): f"/r{i % 3}" for i in range(9)})
    for rng in rngs(300):
        p = rackaware.new_ensemble(t, REQ_332, config(), rng)
        assert len({t.rack_of(b) for b in p.ensemble}) == 3


def test_every_window_spans_min_racks_with_many_racks() -> None:
    t = topology({bid(i): f"/r{i % 6}" for i in range(30)})  # 6 racks x 5
    req = EnsembleRequest(7, 3, 2)
    for rng in rngs(200):
        p = rackaware.new_ensemble(t, req, config(min_num_racks_per_write_quorum=3), rng)
        for i in range(7):
            window = [p.ensemble[(i + j) % 7] for j in range(3)]
            assert len({t.rack_of(b) for b in window}) == 3


def test_selection_is_roughly_uniform_over_bookies() -> None:
    t = topology({bid(i): f"/r{i % 4}" for i in range(12)})
    counts: Counter[str] = Counter()
    rng = random.Random(7)
    for _ in range(6000):
        counts.update(rackaware.new_ensemble(t, REQ_332, config(), rng).ensemble)
    expected = 6000 * 3 / 12
    assert all(abs(c - expected) < 0.12 * expected for c in counts.values()), counts


def test_single_rack_is_random_and_fail_unless_enforced() -> None:
    t = topology({bid(i): "/only" for i in range(5)})
    p = rackaware.new_ensemble(t, REQ_332, config(), random.Random(0))
    assert len(set(p.ensemble)) == 3 and p.adherence is Adherence.FAIL
    p1 = rackaware.new_ensemble(t, EnsembleRequest(1, 1, 1), config(), random.Random(0))
    assert p1.adherence is Adherence.FAIL  # always FAIL on one rack, even with Qw == 1
    with pytest.raises(NotEnoughBookies) as info:
        rackaware.new_ensemble(t, REQ_332, config(enforce_min_num_racks_per_write_quorum=True),
                               random.Random(0))
    assert info.value.short_set == "racks in the topology"


def test_not_enforced_falls_back_to_random_and_reports_fail() -> None:
    # two racks, E=Qw=3 and min racks 3: the rule cannot hold, but enforce is off
    t = topology({bid(i): f"/r{i % 2}" for i in range(6)})
    p = rackaware.new_ensemble(t, REQ_332, config(min_num_racks_per_write_quorum=3),
                               random.Random(3))
    assert len(p.ensemble) == 3 and p.adherence is Adherence.FAIL


def test_enforce_excludes_default_rack_bookies() -> None:
    racks = {bid(i): f"/r{i % 3}" for i in range(9)}
    t = topology(racks, extra_writable=[f"x{i}:3181" for i in range(10)])
    cfg = config(enforce_min_num_racks_per_write_quorum=True)
    for rng in rngs(200):
        p = rackaware.new_ensemble(t, REQ_332, cfg, rng)
        assert all(t.rack_of(b) != DEFAULT_RACK for b in p.ensemble)


def test_exclusions_and_read_only_are_never_chosen() -> None:
    racks = {bid(i): f"/r{i % 3}" for i in range(9)}
    t = topology(racks, writable=[bid(i) for i in range(8)], read_only=[bid(8)])
    for rng in rngs(200):
        p = rackaware.new_ensemble(t, REQ_332, config(), rng, exclude={bid(0)})
        assert bid(0) not in p.ensemble and bid(8) not in p.ensemble


def test_not_enough_bookies_names_reasons() -> None:
    t = topology({bid(i): f"/r{i}" for i in range(3)}, read_only=[bid(9)])
    with pytest.raises(NotEnoughBookies) as info:
        rackaware.new_ensemble(t, REQ_332, config(), random.Random(0), exclude={bid(0)})
    reasons = dict(info.value.excluded)
    assert reasons[bid(0)] == "excluded by the caller"
    assert reasons[bid(9)] == "read-only"
    assert info.value.needed == 3 and info.value.available == 2


def test_local_rack_supplies_the_first_bookie() -> None:
    t = topology({bid(i): f"/r{i % 4}" for i in range(12)})
    req = EnsembleRequest(3, 3, 2, local_rack="/r2")
    for rng in rngs(100):
        assert t.rack_of(rackaware.new_ensemble(t, req, config(), rng).ensemble[0]) == "/r2"


@pytest.mark.parametrize(("e", "w", "a"), [(2, 3, 2), (3, 2, 3), (0, 0, 0), (3, 3, -1)])
def test_invalid_requests(e: int, w: int, a: int) -> None:
    t = topology({bid(i): f"/r{i}" for i in range(5)})
    with pytest.raises(InvalidPlacementRequest):
        rackaware.new_ensemble(t, EnsembleRequest(e, w, a), config(), random.Random(0))


def test_replace_prefers_same_rack_then_unused_rack() -> None:
    racks = {bid(1): "/a", bid(2): "/b", bid(3): "/c", bid(4): "/a", bid(5): "/d"}
    t = topology(racks)
    ens = (bid(1), bid(2), bid(3))
    for rng in rngs(50):
        p = rackaware.replace_bookie(t, REQ_332, config(), rng, ens, bid(1))
        assert p.replacement == bid(4) and p.ensemble == (bid(4), bid(2), bid(3))
    for rng in rngs(50):
        p = rackaware.replace_bookie(t, REQ_332, config(), rng, ens, bid(1), exclude={bid(4)})
        assert p.replacement == bid(5)
        assert p.adherence is Adherence.MEETS_STRICT


def test_replace_falls_back_to_random_unless_enforced() -> None:
    racks = {bid(1): "/a", bid(2): "/b", bid(3): "/c", bid(4): "/b"}
    t = topology(racks)
    ens = (bid(1), bid(2), bid(3))
    p = rackaware.replace_bookie(t, REQ_332, config(), random.Random(0), ens, bid(1))
    assert p.replacement == bid(4)
    with pytest.raises(NotEnoughBookies):
        rackaware.replace_bookie(t, REQ_332, config(enforce_min_num_racks_per_write_quorum=True),
                                 random.Random(0), ens, bid(1))


def test_replace_to_adhere_changes_one_position() -> None:
    racks = {bid(1): "/r1", bid(2): "/r1", bid(3): "/r2", bid(4): "/r3", bid(5): "/r3"}
    t = topology(racks)
    req = EnsembleRequest(3, 3, 2)
    cfg = config(min_num_racks_per_write_quorum=3)
    current = (bid(1), bid(2), bid(3))
    assert rackaware.adherence(t, current, 3, 2, cfg) is Adherence.FAIL
    for rng in rngs(30):
        p = rackaware.replace_to_adhere(t, req, cfg, rng, current)
        assert p.adherence is Adherence.MEETS_STRICT
        assert sum(a != b for a, b in zip(p.ensemble, current, strict=True)) == 1
        assert rackaware.adherence(t, p.ensemble, 3, 2, cfg) is Adherence.MEETS_STRICT


def test_replace_to_adhere_keeps_adhering_and_gives_up_on_one_rack() -> None:
    t = topology({bid(i): f"/r{i % 3}" for i in range(6)})
    ok = (bid(0), bid(1), bid(2))
    p = rackaware.replace_to_adhere(t, REQ_332, config(), random.Random(0), ok)
    assert p.ensemble == ok and p.adherence is Adherence.MEETS_STRICT
    one = topology({bid(i): "/r" for i in range(4)})
    p = rackaware.replace_to_adhere(one, REQ_332, config(), random.Random(0),
                                    (bid(0), bid(1), bid(2)))
    assert p.ensemble == () and p.adherence is Adherence.FAIL


def test_weighted_rack_aware_prefers_heavy_bookies() -> None:
    racks = {bid(i): f"/r{i % 2}" for i in range(6)}
    weights = dict.fromkeys(racks, 100.0)
    weights[bid(0)] = 300.0
    t = topology(racks, weights=weights)
    cfg = config(disk_weight_based_placement_enabled=True)
    rng = random.Random(11)
    counts: Counter[str] = Counter()
    for _ in range(6000):
        counts.update(rackaware.new_ensemble(t, EnsembleRequest(1, 1, 1), cfg, rng).ensemble)
    ratio = counts[bid(0)] / counts[bid(2)]
    assert 2.4 < ratio < 3.6, counts
