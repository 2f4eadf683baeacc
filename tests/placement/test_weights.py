"""Disk-weight selection (§5, TestWeightedRandomSelection numbers)."""

import random
from collections import Counter

from placement.weights import WeightedSelector, capped_probabilities, dynamic_choice


def test_cap_at_multiple_of_median() -> None:
    w = {"a": 50, "b": 100, "c": 100, "d": 200, "e": 500}
    p = capped_probabilities(w, 4)
    assert p["e"] / p["d"] == 2.0  # 500 capped to 4 x median 100 = 400
    assert p["e"] / p["b"] == 4.0


def test_no_cap_with_negative_multiple() -> None:
    p = capped_probabilities({"a": 100, "b": 100, "c": 100, "d": 1000}, -1)
    assert p["d"] / p["a"] == 10.0


def test_zero_weights_get_smallest_positive_and_all_zero_is_uniform() -> None:
    p = capped_probabilities({"a": 0, "b": 10, "c": 20}, 3)
    assert p["a"] == p["b"]
    q = capped_probabilities({"a": 0, "b": 0}, 3)
    assert q["a"] == q["b"] > 0


def test_selector_draw_distribution() -> None:
    sel = WeightedSelector({"a": 50, "b": 100, "c": 100, "d": 200, "e": 500}, 4)
    rng = random.Random(5)
    counts = Counter(sel.draw(rng) for _ in range(40000))
    assert 1.8 < counts["e"] / counts["d"] < 2.2
    assert 3.6 < counts["e"] / counts["b"] < 4.4


def test_dynamic_choice_caps_over_candidates() -> None:
    rng = random.Random(2)
    counts = Counter(dynamic_choice(["a", "b", "c"], {"a": 100, "b": 100, "c": 10000}, 2, rng)
                     for _ in range(30000))
    assert 1.8 < counts["c"] / counts["a"] < 2.2
