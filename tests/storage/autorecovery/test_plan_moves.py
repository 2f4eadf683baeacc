"""`check_move`: a planned move is checked against the live metadata, topology and the
ledger's recorded policy before anything is copied (pure: no etcd, no bookies)."""

from __future__ import annotations

import pytest

from metastore.ledger_metadata import LedgerMetadata, LedgerState
from placement import AffinityGroups, PlacementConfig, Topology
from storage.autorecovery import Stale
from storage.autorecovery.worker import check_move
from storage.ledger.metadata import managed_ledger_custom_metadata

A, B, C, D, X = (f"10.0.0.{i}:3181" for i in range(1, 6))
TOPOLOGY = Topology.build(
    {"iso": {b: {"rack": f"/r{i}"} for i, b in enumerate((A, B, C, D))},
     "other": {X: {"rack": "/r9"}}},
    [A, B, C, D, X])
STRICT = AffinityGroups(("iso",), strict=True)


def ledger(state: LedgerState = LedgerState.CLOSED) -> LedgerMetadata:
    closed = state is LedgerState.CLOSED
    return LedgerMetadata(
        ledger_id=9, ensemble_size=2, write_quorum_size=2, ack_quorum_size=2,
        ensembles={0: (A, B), 10: (A, C)}, state=state,
        last_entry_id=19 if closed else -1, length=100 if closed else 0,
        custom_metadata=managed_ledger_custom_metadata("t/ns/persistent/x", STRICT))


def test_a_move_that_still_applies_gives_the_segment_bounds() -> None:
    assert check_move(ledger(), TOPOLOGY, PlacementConfig(), 0, 1, B, D) == (0, 9)
    assert check_move(ledger(), TOPOLOGY, PlacementConfig(), 1, 0, A, D) == (10, 19)


@pytest.mark.parametrize(("segment", "position", "out", "into", "why"), [
    (2, 0, A, D, "no segment 2"),
    (0, 1, C, D, "position 1 holds 10.0.0.2:3181, not 10.0.0.3:3181"),
    (0, 1, B, A, "already in the segment"),
    (0, 1, B, X, "not accepted by the ledger's recorded policy now: FOREIGN_GROUP"),
    (0, 1, B, "10.0.0.7:3181", "not accepted"),
])
def test_stale_moves_are_refused_with_the_reason(segment: int, position: int, out: str,
                                                 into: str, why: str) -> None:
    with pytest.raises(Stale, match=why):
        check_move(ledger(), TOPOLOGY, PlacementConfig(), segment, position, out, into)


def test_the_open_ledgers_last_segment_belongs_to_its_writer() -> None:
    with pytest.raises(Stale, match="its writer owns it"):
        check_move(ledger(LedgerState.OPEN), TOPOLOGY, PlacementConfig(), 1, 0, A, D)
