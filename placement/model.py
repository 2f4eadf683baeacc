"""Value types shared by every policy: requests in, `Placement` out."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from placement.errors import InvalidPlacementRequest


class Adherence(enum.IntEnum):
    """BookKeeper's PlacementPolicyAdherence: FAIL(1) < MEETS_SOFT(3) < MEETS_STRICT(5)."""

    FAIL = 1
    MEETS_SOFT = 3
    MEETS_STRICT = 5


class Source(enum.StrEnum):
    """Why a bookie was eligible for an ensemble."""

    PRIMARY = "primary"
    SECONDARY = "secondary"
    UNGROUPED = "ungrouped"
    ANY = "any"


@dataclass(frozen=True, slots=True)
class EnsembleRequest:
    """Ensemble size E, write quorum Qw and ack quorum Qa of one ledger.

    `local_rack` is the client's own location; rack-aware placement draws the first
    bookie from it unless it is the default rack (BookKeeper's local-node preference).
    """

    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    local_rack: str | None = None

    def validate(self) -> None:
        """Raise InvalidPlacementRequest unless E >= Qw >= Qa > 0."""
        e, w, a = self.ensemble_size, self.write_quorum, self.ack_quorum
        if e <= 0 or w <= 0 or a <= 0:
            raise InvalidPlacementRequest(
                f"ensemble size, write quorum and ack quorum must be > 0 (E={e}, Qw={w}, Qa={a})"
            )
        if e < w:
            raise InvalidPlacementRequest(f"ensemble size E={e} is less than write quorum Qw={w}")
        if w < a:
            raise InvalidPlacementRequest(f"write quorum Qw={w} is less than ack quorum Qa={a}")


@dataclass(frozen=True, slots=True)
class ChosenBookie:
    """One ensemble member with where it lives and why it was eligible."""

    bookie_id: str
    rack: str
    group: str | None
    source: Source


@dataclass(frozen=True, slots=True)
class ExcludedBookie:
    """A bookie that was not a candidate, and why."""

    bookie_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Placement:
    """The decision: the ordered ensemble, how well it adheres, and why.

    `bookies` describes each member (same order as `ensemble`). For a replacement,
    `replaced` is the bookie that left and `replacement` the one that took its index.
    An answer with `Adherence.FAIL` is a best effort, not an error (as in BookKeeper).
    """

    ensemble: tuple[str, ...]
    adherence: Adherence
    reasons: tuple[str, ...] = ()
    bookies: tuple[ChosenBookie, ...] = ()
    replaced: str | None = None
    replacement: str | None = None
