"""Entry striping and ack quorum (BookKeeper's RoundRobinDistributionSchedule, §8).

Entry e of a ledger with ensemble size E and write quorum Qw goes to the bookies at
ensemble indexes (e + i) mod E for i < Qw, in that order.
"""

from __future__ import annotations

from collections.abc import Iterable

from placement.errors import InvalidPlacementRequest


def _check(ensemble_size: int, write_quorum: int) -> None:
    if ensemble_size <= 0 or write_quorum <= 0 or write_quorum > ensemble_size:
        raise InvalidPlacementRequest(
            f"need 0 < Qw <= E (E={ensemble_size}, Qw={write_quorum})")


def write_set(entry_id: int, ensemble_size: int, write_quorum: int) -> tuple[int, ...]:
    """Ensemble indexes that store `entry_id`. E=5,Qw=3: entry 4 -> (4, 0, 1)."""
    _check(ensemble_size, write_quorum)
    if entry_id < 0:
        raise InvalidPlacementRequest(f"entry id must be >= 0, got {entry_id}")
    return tuple((entry_id + i) % ensemble_size for i in range(write_quorum))


def has_entry(bookie_index: int, entry_id: int, ensemble_size: int, write_quorum: int) -> bool:
    """Does the bookie at `bookie_index` store `entry_id`?"""
    _check(ensemble_size, write_quorum)
    if entry_id < 0 or not 0 <= bookie_index < ensemble_size:
        raise InvalidPlacementRequest(
            f"bad entry {entry_id} or bookie index {bookie_index} for E={ensemble_size}")
    return (bookie_index - entry_id) % ensemble_size < write_quorum


def entries_striped_to_bookie(
    bookie_index: int, first_entry: int, last_entry: int, ensemble_size: int,
    write_quorum: int,
) -> list[int]:
    """Entry ids in [first, last] stored on `bookie_index` (getEntriesStripedToTheBookie)."""
    if first_entry < 0 or last_entry < first_entry:
        raise InvalidPlacementRequest(f"bad entry range [{first_entry}, {last_entry}]")
    return [e for e in range(first_entry, last_entry + 1)
            if has_entry(bookie_index, e, ensemble_size, write_quorum)]


def ack_quorum_reached(acked_indexes: Iterable[int], ack_quorum: int) -> bool:
    """Distinct acknowledging bookies >= Qa (a duplicate ack does not count)."""
    return len(set(acked_indexes)) >= ack_quorum


def failures_exceed_tolerance(failed_indexes: Iterable[int], write_quorum: int,
                              ack_quorum: int) -> bool:
    """failBookieAndCheck: more than Qw - Qa distinct failures means the add cannot complete."""
    return len(set(failed_indexes)) > write_quorum - ack_quorum


def lac_read_covered(unknown_indexes: Iterable[int], ensemble_size: int, write_quorum: int,
                     ack_quorum: int) -> bool:
    """Read-LAC may finish: every write-quorum window has < Qa bookies with unknown answers."""
    unknown = set(unknown_indexes)
    for start in range(ensemble_size):
        window = {(start + i) % ensemble_size for i in range(write_quorum)}
        if len(window & unknown) >= ack_quorum:
            return False
    return True
