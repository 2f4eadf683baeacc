import pytest

from placement import InvalidPlacementRequest, entries_striped_to_bookie, has_entry, write_set
from placement.striping import ack_quorum_reached, failures_exceed_tolerance, lac_read_covered


def test_write_sets_round_robin() -> None:
    assert write_set(1, 5, 3) == (1, 2, 3)
    assert write_set(4, 5, 3) == (4, 0, 1)
    assert write_set(0, 3, 3) == (0, 1, 2)


def test_bookie_holds_entry_iff_in_write_set() -> None:
    for e in range(20):
        for b in range(5):
            assert has_entry(b, e, 5, 3) == (b in write_set(e, 5, 3))


def test_entries_striped_to_bookie_e3_qw2() -> None:
    stored = entries_striped_to_bookie(2, 0, 5, 3, 2)
    assert 4 in stored and 0 not in stored and 3 not in stored
    assert stored == [1, 2, 4, 5]


@pytest.mark.parametrize("args", [(-1, 0, 3, 3, 2), (3, 0, 3, 3, 2), (0, 5, 4, 3, 2),
                                  (0, -1, 3, 3, 2)])
def test_striping_rejects_bad_arguments(args: tuple[int, ...]) -> None:
    with pytest.raises(InvalidPlacementRequest):
        entries_striped_to_bookie(*args)


def test_ack_quorum_counts_distinct_bookies() -> None:
    assert not ack_quorum_reached([0, 0], 2)
    assert ack_quorum_reached([0, 1], 2)


def test_failures_beyond_qw_minus_qa() -> None:
    assert not failures_exceed_tolerance([1], 3, 2)
    assert failures_exceed_tolerance([1, 2], 3, 2)


def test_lac_covered_when_each_window_has_fewer_than_qa_unknown() -> None:
    assert lac_read_covered([0], 3, 3, 2)
    assert not lac_read_covered([0, 1], 3, 3, 2)
    assert lac_read_covered([0, 2], 4, 2, 2)  # windows (0,1),(1,2),(2,3),(3,0): one unknown each
