"""The ensemble under construction and its write-quorum coverage predicate (§2.1, §3.2).

`CoverageEnsemble` is BookKeeper's RRTopologyAwareCoverageEnsemble: positions are filled
in order 0..E-1, each position belongs to the Qw cyclic write-quorum windows that contain
it, and `accepts(c)` says whether `c` may take the next position:

- rack rule (RackQuorumCoverageSet), keyed by rack or region: the first W-m+1 members of
  a window are free; later ones must reach m distinct keys, or still be able to;
- durability rule (RackOrRegionDurabilityCoverageSet, when `durability` > 1): no
  `durability`-1 regions may hold an ack quorum of any window.

A `parent` ensemble (the region level, inside region-aware placement) must accept too,
and `add` records the bookie in both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache


@lru_cache(maxsize=1024)
def windows_for(ensemble_size: int, write_quorum: int, pos: int) -> tuple[int, ...]:
    """Indexes of the write-quorum windows (by starting position) containing `pos`."""
    return tuple(s % ensemble_size for s in range(pos - write_quorum + 1, pos + 1))


@lru_cache(maxsize=1024)
def window_table(ensemble_size: int, write_quorum: int,
                 single_window: bool) -> tuple[tuple[int, ...], ...]:
    """`windows_for` of every position 0..E-1, then `()` for a full ensemble.

    `single_window`: the durability rule of an E == Qw ensemble has one window, (0,).
    """
    if single_window:
        return ((0,),) * (ensemble_size + 1)
    return (*(windows_for(ensemble_size, write_quorum, pos) for pos in range(ensemble_size)),
            ())


class CoverageEnsemble:
    """Ordered ensemble under construction plus its per-window coverage state."""

    __slots__ = (
        "_all_keys", "_alloc", "_free", "_keys", "_next", "_seen", "_table", "ack_quorum",
        "chosen",
        "chosen_set", "durability", "ensemble_size", "key", "min_distinct", "parent",
        "write_quorum",
    )

    def __init__(
        self,
        ensemble_size: int,
        write_quorum: int,
        key: Mapping[str, str],
        min_distinct: int,
        *,
        durability: int = 0,
        ack_quorum: int = 0,
        all_keys: Iterable[str] = (),
        parent: CoverageEnsemble | None = None,
    ) -> None:
        self.ensemble_size = ensemble_size
        self.write_quorum = write_quorum
        self.ack_quorum = ack_quorum
        self.key = key
        self.min_distinct = min(write_quorum, min_distinct)
        self.durability = durability
        self.parent = parent
        self.chosen: list[str] = []
        self.chosen_set: set[str] = set()
        self._seen = [0] * ensemble_size
        self._keys: list[set[str]] = [set() for _ in range(ensemble_size)]
        self._all_keys = tuple(all_keys)
        # per-window key counts: only the durability rule reads them
        self._alloc: list[dict[str, int]] = [
            dict.fromkeys(self._all_keys, 0) for _ in range(ensemble_size)
        ] if durability > 0 else []
        self._table = window_table(ensemble_size, write_quorum,
                                   durability > 0 and ensemble_size == write_quorum)
        self._next = self._table[0]  # the windows the next position belongs to
        # rack rule is vacuous when a window needs < 2 keys or has < 2 members
        self._free = durability == 0 and (write_quorum < 2 or self.min_distinct < 2)

    def copy(self) -> CoverageEnsemble:
        """Independent copy (region-aware tries an allocation on a copy)."""
        dup = CoverageEnsemble.__new__(CoverageEnsemble)
        for name in ("ensemble_size", "write_quorum", "ack_quorum", "key", "min_distinct",
                     "durability", "_all_keys", "_free", "_table", "_next"):
            setattr(dup, name, getattr(self, name))
        dup.parent = self.parent.copy() if self.parent is not None else None
        dup.chosen = list(self.chosen)
        dup.chosen_set = set(self.chosen_set)
        dup._seen = list(self._seen)
        dup._keys = [set(k) for k in self._keys]
        dup._alloc = [dict(a) for a in self._alloc]
        return dup

    def accepts(self, bookie: str) -> bool:
        """May `bookie` take the next position?"""
        if bookie in self.chosen_set:
            return False
        if not self._free:
            if self.durability > 0:
                if not self._durable(bookie):
                    return False
            elif not self._rack_ok(bookie):
                return False
        return self.parent is None or self.parent.accepts(bookie)

    def _rack_ok(self, bookie: str) -> bool:
        w, m = self.write_quorum, self.min_distinct
        free = w - m + 1  # members a window takes before the rule binds
        k = self.key[bookie]
        all_seen, all_keys = self._seen, self._keys
        for q in self._next:
            seen = all_seen[q]
            if seen >= free:
                keys = all_keys[q]
                n = len(keys) + (0 if k in keys else 1)
                if n < m and (w - seen - 1) < (m - n):
                    return False
        return True

    def _durable(self, bookie: str) -> bool:
        if self.durability <= 1:
            return True
        region = self.key[bookie]
        for q in self._next:
            alloc = self._alloc[q]
            others = sorted((v for r, v in alloc.items() if r != region), reverse=True)
            worst = sum(others[: self.durability - 2])
            if alloc.get(region, 0) + 1 + worst > self.ack_quorum - 1:
                return False
        return True

    def add(self, bookie: str) -> bool:
        """Append `bookie` without checking the predicate (BookKeeper's addNode)."""
        if bookie in self.chosen_set:
            return False
        k = self.key[bookie]
        seen, keys = self._seen, self._keys
        windows = self._next
        for q in windows:
            seen[q] += 1
            keys[q].add(k)
        if self.durability > 0:
            for q in windows:
                alloc = self._alloc[q]
                alloc[k] = alloc.get(k, 0) + 1
        self.chosen.append(bookie)
        self.chosen_set.add(bookie)
        table = self._table
        self._next = table[min(len(self.chosen), len(table) - 1)]
        return self.parent is None or self.parent.add(bookie)

    def distinct_keys(self) -> int:
        """Distinct keys (regions, racks) over the whole ensemble so far."""
        return len({self.key[b] for b in self.chosen})
