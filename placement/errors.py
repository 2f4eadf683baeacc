"""Errors raised by the placement engine.

The tree::

    PlacementError               anything the engine refuses to decide
    ├── NotEnoughBookies         constraints leave too few bookies (BKNotEnoughBookiesException)
    └── InvalidPlacementRequest  the request is malformed (E < Qw, Qw < Qa, sizes <= 0, ...)

`NotEnoughBookies` carries a structured explanation as well as a readable message:
which set was short (`short_set`), how many were `needed` and `available`, the
`constraint` that could not be met, per excluded bookie the reason (`excluded`) and,
under isolation, how many writable bookies each group had (`group_counts`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

_MAX_LISTED = 20


class Shortage(enum.Enum):
    """What kind of set was short, for code to branch on (the text is for people)."""

    ELIGIBLE_BOOKIES = "eligible bookies"  # too few candidates at all, before any rule
    FAULT_DOMAINS = "fault domains"  # too few racks, regions or zones for the rule
    RULE = "rule"  # enough bookies, but not enough that keep the placement rule
    REPLACEMENTS = "replacements"  # no candidate to replace a bookie with


class PlacementError(Exception):
    """Root of every error raised by `placement`."""


class InvalidPlacementRequest(PlacementError, ValueError):
    """The request cannot be placed under any topology (bad E/Qw/Qa, bad arguments)."""


class NotEnoughBookies(PlacementError):
    """Too few bookies satisfy the constraints.

    `str(exc)` is a human explanation; the attributes hold the same facts as data.
    """

    def __init__(
        self,
        *,
        short_set: str,
        needed: int,
        available: int,
        constraint: str = "",
        excluded: Sequence[tuple[str, str]] = (),
        group_counts: Mapping[str, int] | None = None,
        shortage: Shortage = Shortage.RULE,
    ) -> None:
        self.shortage = shortage
        self.short_set = short_set
        self.needed = needed
        self.available = available
        self.constraint = constraint
        self.excluded: list[tuple[str, str]] = list(excluded)
        self.group_counts: dict[str, int] = dict(group_counts or {})
        super().__init__(self._message())

    @property
    def shortfall(self) -> int:
        """How many more bookies (or racks, regions, zones) the short set would need."""
        return max(0, self.needed - self.available)

    def _message(self) -> str:
        parts = [
            f"Not enough bookies: {self.short_set} has {self.available}, "
            f"needs {self.needed} (short by {self.shortfall})"
        ]
        if self.constraint:
            parts.append(f"constraint: {self.constraint}")
        if self.group_counts:
            counts = ", ".join(
                f"'{g}' has {n} writable" for g, n in sorted(self.group_counts.items())
            )
            parts.append(f"groups: {counts}")
        if self.excluded:
            listed = "; ".join(f"{b}: {r}" for b, r in self.excluded[:_MAX_LISTED])
            more = len(self.excluded) - _MAX_LISTED
            suffix = f"; ... and {more} more" if more > 0 else ""
            parts.append(f"left out: {listed}{suffix}")
        return ". ".join(parts)

    def fields(self) -> dict[str, Any]:
        return {"short_set": self.short_set, "needed": self.needed, "available": self.available,
                "constraint": self.constraint, "excluded": self.excluded,
                "group_counts": self.group_counts, "shortage": self.shortage}  # fmt: skip

    def derive(self, **changes: Any) -> NotEnoughBookies:
        """The same explanation with `changes` (e.g. the excluded bookies filled in)."""
        return NotEnoughBookies(**{**self.fields(), **changes})

    def __reduce__(self) -> tuple[object, ...]:  # keep keyword-only construction picklable
        return (_rebuild, (self.fields(),))


def _rebuild(fields: dict[str, Any]) -> NotEnoughBookies:
    return NotEnoughBookies(**fields)
