"""Disk-weight-based selection (placement.md §5).

`capped_probabilities` is BookKeeper's `WeightedRandomSelectionImpl.updateMap`: weight =
free disk bytes; zero weights get the smallest positive probability; each probability is
capped at `multiple` x the median's (median over all weights, zeros included). A
`WeightedSelector` draws from those probabilities in O(log n) per draw.
`dynamic_choice` is the per-call variant zone-aware placement uses (§5.2).
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Mapping, Sequence


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    if n % 2:
        return float(ordered[mid])
    return (ordered[mid - 1] + ordered[mid]) / 2.0


def capped_probabilities(
    weights: Mapping[str, float], multiple: float
) -> dict[str, float]:
    """Relative selection probability of each bookie (not normalised to 1).

    `multiple <= 0` disables the cap.
    """
    if not weights:
        return {}
    total = float(sum(weights.values()))
    positive = [w for w in weights.values() if w > 0]
    if total == 0 or not positive:
        min_nz, median, total = 1.0, 1.0, float(len(weights))
    else:
        min_nz, median = float(min(positive)), _median(list(weights.values()))
    p_min = min_nz / total
    p_max = multiple * (median / total)
    out: dict[str, float] = {}
    for bookie, weight in weights.items():
        p = weight / total if weight > 0 else p_min
        if p_max > 0 and p > p_max:
            p = p_max
        out[bookie] = p
    return out


class WeightedSelector:
    """Weighted random draws (with replacement) over a fixed set of bookies."""

    __slots__ = ("_cumulative", "_ids", "_probability", "_total")

    def __init__(self, weights: Mapping[str, float], multiple: float) -> None:
        probability = capped_probabilities(weights, multiple)
        self._ids: tuple[str, ...] = tuple(probability)
        self._probability = probability
        self._cumulative: list[float] = list(itertools.accumulate(probability.values()))
        self._total = self._cumulative[-1] if self._cumulative else 0.0

    def __len__(self) -> int:
        return len(self._ids)

    def probability(self, bookie: str) -> float:
        """Relative probability of `bookie` (0 if unknown)."""
        return self._probability.get(bookie, 0.0)

    def draw(self, rng: random.Random) -> str:
        """One bookie, drawn with its capped probability."""
        if not self._ids:
            raise IndexError("empty selector")
        r = rng.random() * self._total
        idx = bisect.bisect_right(self._cumulative, r)
        return self._ids[min(idx, len(self._ids) - 1)]

    def choice_among(self, candidates: Sequence[str], rng: random.Random) -> str:
        """A weighted choice restricted to `candidates` (all must be known)."""
        weights = [self._probability.get(c, 0.0) for c in candidates]
        if sum(weights) <= 0:
            return rng.choice(list(candidates))
        return rng.choices(list(candidates), weights=weights, k=1)[0]


def dynamic_choice(
    candidates: Sequence[str],
    weights: Mapping[str, float],
    multiple: float,
    rng: random.Random,
) -> str:
    """Zone-aware's DynamicWeightedRandomSelection: median and cap over `candidates` only."""
    if not candidates:
        raise IndexError("no candidates")
    raw = [float(weights.get(c, 0.0)) for c in candidates]
    positive = [w for w in raw if w > 0]
    if not positive:
        min_nz, median = 1.0, 1.0
    else:
        min_nz, median = min(positive), float(int(_median(raw)))
    max_w = multiple * median
    effective = []
    for w in raw:
        e = min_nz if w <= 0 else w
        if max_w > 0 and e > max_w:
            e = max_w
        effective.append(e)
    return rng.choices(list(candidates), weights=effective, k=1)[0]
