"""Random selection primitives shared by the policies.

`pick` returns a uniformly (or, with a selector, weight-proportionally) random member of
`pool` that satisfies `ok`, or None. It first draws at random and rejects misses, which
costs O(1) per call when most of the pool qualifies; after a bounded number of misses it
enumerates the pool exactly. Both phases give every qualifying bookie the same chance
(or its weight's share), so this is BookKeeper's "shuffle the scope and take the first
that passes" in distribution, without the O(n) shuffle per position.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from placement.weights import WeightedSelector

_TRIES = 24

Accept = Callable[[str], bool]


def pick(
    pool: Sequence[str],
    rng: random.Random,
    ok: Accept,
    selector: WeightedSelector | None = None,
) -> str | None:
    """A random member of `pool` passing `ok`, or None if there is none.

    `selector`, when given, must cover `pool` and sets the draw weights.
    """
    n = len(pool)
    if n == 0:
        return None
    if n > _TRIES:
        draw = rng.random
        if selector is None:
            for _ in range(_TRIES):
                b = pool[int(draw() * n)]
                if ok(b):
                    return b
        else:
            for _ in range(_TRIES):
                b = selector.draw(rng)
                if ok(b):
                    return b
    cands = [b for b in pool if ok(b)]
    if not cands:
        return None
    if selector is None:
        return cands[int(rng.random() * len(cands))]
    return selector.choice_among(cands, rng)


def pick_many(
    pool: Sequence[str],
    k: int,
    rng: random.Random,
    ok: Accept,
    selector: WeightedSelector | None = None,
) -> list[str] | None:
    """k distinct random members passing `ok` (drawn one after another), or None."""
    chosen: list[str] = []
    taken: set[str] = set()
    for _ in range(k):
        b = pick(pool, rng, lambda c: c not in taken and ok(c), selector)
        if b is None:
            return None
        chosen.append(b)
        taken.add(b)
    return chosen
