"""Which entries of a ledger a bookie holds, in BookKeeper's `AvailabilityOfEntriesOfLedger`
byte format (the `availabilityOfEntriesOfLedger` of a V3 GET_LIST_OF_ENTRIES_OF_LEDGER
response). Pure: no I/O.

Layout (all big-endian, as Java's ByteBuffer writes them):

    header, 64 bytes     i32 version (0) | i32 number of sequence groups | 56 zero bytes
    per group, 24 bytes  i64 firstSequenceStart | i64 lastSequenceStart
                         | i32 sequenceSize | i32 sequencePeriod

A sequence is a run of consecutive entry ids; a group is sequences of `sequenceSize` entries
starting every `sequencePeriod` ids from `firstSequenceStart` to `lastSequenceStart`. Groups are
in ascending order of their first entry. A group with one sequence has lastSequenceStart =
firstSequenceStart and period 0.

Upstream's encoder never puts two sequences in one group (a new group's lastSequenceStart is
its first, so its "same period" test never passes): it writes one group per run of consecutive
entries, period 0. `encode_availability` writes exactly that, so our bytes equal a Java bookie's;
`EntryAvailability` reads any groups, periods included, as upstream's reader does.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

HEADER_SIZE = 64
CURRENT_HEADER_VERSION = 0  # upstream's V0
_HEADER = struct.Struct(">ii")
_GROUP = struct.Struct(">qqii")
GROUP_SIZE = _GROUP.size  # 24


@dataclass(frozen=True, slots=True)
class SequenceGroup:
    first_sequence_start: int
    last_sequence_start: int
    sequence_size: int
    sequence_period: int

    @property
    def entry_count(self) -> int:
        """Upstream's `getNumOfEntriesInSequenceGroup`."""
        span = self.last_sequence_start - self.first_sequence_start
        if span == 0:
            return self.sequence_size
        return (span // self.sequence_period + 1) * self.sequence_size

    def holds(self, entry_id: int) -> bool:
        offset = entry_id - self.first_sequence_start
        if offset < 0 or entry_id > self.last_sequence_start + self.sequence_size:
            return False
        if self.sequence_period == 0:
            return offset < self.sequence_size
        return offset % self.sequence_period < self.sequence_size


class EntryAvailability:
    """The decoded set of entries: membership by a floor search over the groups, as upstream's
    `isEntryAvailable`."""

    def __init__(self, groups: Iterable[SequenceGroup]) -> None:
        self.groups = sorted(groups, key=lambda g: g.first_sequence_start)
        self._starts = [g.first_sequence_start for g in self.groups]

    def __contains__(self, entry_id: int) -> bool:
        at = bisect_right(self._starts, entry_id) - 1
        return at >= 0 and self.groups[at].holds(entry_id)

    @property
    def entry_count(self) -> int:
        """Upstream's `getTotalNumOfAvailableEntries`."""
        return sum(g.entry_count for g in self.groups)

    def missing(self, expected: Iterable[int]) -> list[int]:
        """The entries of `expected` not held (upstream's `getUnavailableEntries`)."""
        return [e for e in expected if e not in self]


def sequence_groups(entry_ids: Iterable[int]) -> list[SequenceGroup]:
    """Upstream's grouping of ascending entry ids (duplicates ignored): one group per run of
    consecutive ids."""
    groups: list[SequenceGroup] = []
    start = size = -1
    for entry_id in entry_ids:
        if size > 0 and start <= entry_id < start + size:
            continue  # already in the current run
        if size > 0 and entry_id == start + size:
            size += 1
            continue
        if size > 0:
            groups.append(SequenceGroup(start, start, size, 0))
        start, size = entry_id, 1
    if size > 0:
        groups.append(SequenceGroup(start, start, size, 0))
    return groups


def encode_availability(entry_ids: Iterable[int]) -> bytes:
    """The serialized state of ascending `entry_ids`, byte for byte as upstream's
    `serializeStateOfEntriesOfLedger` (empty: the 64-byte header with 0 groups)."""
    groups = sequence_groups(entry_ids)
    header = _HEADER.pack(CURRENT_HEADER_VERSION, len(groups)).ljust(HEADER_SIZE, b"\0")
    return header + b"".join(
        _GROUP.pack(g.first_sequence_start, g.last_sequence_start, g.sequence_size,
                    g.sequence_period)
        for g in groups
    )


def decode_availability(raw: bytes) -> EntryAvailability:
    """Read the serialized state; ValueError for a header version above 0 (upstream's
    "Unsupported Header Version") or bytes shorter than the header or its groups."""
    if len(raw) < HEADER_SIZE:
        raise ValueError(f"availability of entries shorter than its {HEADER_SIZE}-byte header")
    version, count = _HEADER.unpack_from(raw)
    if version > CURRENT_HEADER_VERSION:
        raise ValueError(f"Unsupported Header Version: {version}")
    if count < 0 or len(raw) < HEADER_SIZE + count * GROUP_SIZE:
        raise ValueError(f"availability of entries too short for its {count} groups")
    groups = []
    for i in range(count):
        first, last, size, period = _GROUP.unpack_from(raw, HEADER_SIZE + i * GROUP_SIZE)
        if size <= 0 or last < first or (last != first and period <= 0):
            raise ValueError(f"sequence group {i} is not a valid group: "
                             f"{first}, {last}, {size}, {period}")
        groups.append(SequenceGroup(first, last, size, period))
    return EntryAvailability(groups)
