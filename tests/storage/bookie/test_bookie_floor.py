"""The bookie bench's floor (bench/bookie_floor.py, its loop compiled in bench/bookiefloor.pyx):
every add it acknowledges is in its journal, in the bookie's record format, and a frame it cannot
take stops it with a clear reason."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import pytest

from bench.bookie_floor import floor_bookie, floor_frames
from bench.lean_load import build_frames, lean_run
from storage.bookie.journal import ZERO_MARK, journal_path, replay
from tests.storage.bookie.support import MASTER_KEY

PAYLOAD = b"\x3c" * 1024
BASE = 800_000
ENTRY_AT = 28  # in an add frame: length, header, master key, then the packaged entry


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    """A journal file written with zeros, as the bench prepares it, named as the bookie names
    its journal files."""
    path = journal_path(tmp_path, 1)
    path.write_bytes(bytes(16 << 20))
    return path


def journaled(journal: Path) -> list[bytes]:
    """The records the bookie's own journal replay reads from the floor's journal."""
    return list(replay(journal.parent, ZERO_MARK))


@pytest.mark.parametrize("handoff", [False, True], ids=["one thread", "with the hand-offs"])
def test_every_acknowledged_add_is_in_the_journal(journal: Path, handoff: bool) -> None:
    slots, per_slot = 8, 40
    frames = build_frames(slots, per_slot, BASE, PAYLOAD, MASTER_KEY)
    with floor_bookie(journal, handoff) as served:
        adds, _, latencies = lean_run(served.address, frames, 60.0, BASE)
    assert adds == len(latencies) == slots * per_slot == served.adds
    assert 1 <= served.per_group <= slots
    assert served.groups * served.sync_ms > 0
    assert sorted(journaled(journal)) == sorted(frame[ENTRY_AT:] for mine in frames
                                                for frame in mine)  # fmt: skip


def test_repeated_frames_cycle_through_the_distinct_ones(journal: Path) -> None:
    frames = floor_frames(2, 10, BASE, PAYLOAD, MASTER_KEY, distinct=3)
    assert [len(mine) for mine in frames] == [10, 10]
    assert frames[0][3] is frames[0][0] and frames[1][9] is frames[1][0]
    assert len({frames[0][i] for i in range(10)}) == 3
    with floor_bookie(journal) as served:
        assert lean_run(served.address, frames, 60.0, BASE)[0] == 20


@pytest.mark.parametrize("handoff", [False, True], ids=["one thread", "with the hand-offs"])
def test_a_frame_whose_digest_does_not_check_stops_the_floor(journal: Path, handoff: bool
                                                             ) -> None:
    [[frame]] = build_frames(1, 1, BASE, PAYLOAD, MASTER_KEY)
    flipped = frame[:-1] + bytes([frame[-1] ^ 1])
    with pytest.raises(RuntimeError, match="digest does not check"), \
            floor_bookie(journal, handoff) as served, pytest.raises(ConnectionError):
        lean_run(served.address, [[flipped]], 60.0, BASE)
    assert journaled(journal) == []


def test_a_frame_that_is_not_a_plain_add_stops_the_floor(journal: Path) -> None:
    # A V2 read request (header: version 2, READ_ENTRY, no flags; ledger id, entry id).
    read = struct.pack(">IIqq", 4 + 16, (2 << 24) | (2 << 16), BASE, 0)
    with pytest.raises(RuntimeError, match="not a plain add"), floor_bookie(journal) as served:
        host, _, port = served.address.rpartition(":")
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(read)
            assert sock.recv(1) == b""  # closed without an answer


@pytest.mark.parametrize("handoff", [False, True], ids=["one thread", "with the hand-offs"])
def test_a_floor_never_connected_to_ends_when_left(journal: Path, handoff: bool) -> None:
    with floor_bookie(journal, handoff) as served:
        pass
    assert (served.adds, served.groups, served.ending) == (0, 0, "closed")


def test_a_journal_too_small_for_one_turn_is_refused(tmp_path: Path) -> None:
    small = tmp_path / "small.txn"
    small.write_bytes(bytes(1 << 20))
    with pytest.raises(ValueError, match="smaller than one turn"), floor_bookie(small):
        pytest.fail("served over a journal too small")
    assert small.read_bytes() == bytes(1 << 20)
