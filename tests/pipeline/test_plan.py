"""Repair plans on hand-built clusters: what they move, and what they say they cannot fix."""

from __future__ import annotations

import pyarrow as pa

from pipeline.placement_inputs import PlacementInputs, build_placement_inputs
from pipeline.plan import plan_fragment
from pipeline.schema import TABLES
from placement.violations import Violation


def cluster(
    rows: list[tuple[str, str | None, str | None, bool]], *, strict: bool
) -> PlacementInputs:
    """rows: (bookie id, rack, group, read-only); namespace ns/a uses group g1."""
    bookies = pa.Table.from_pylist([
        {"bookie_index": i, "bookie_id": b, "registered": True, "read_only": ro, "rack": rack,
         "region": None, "group": group, "hostname": b, "disk_used": 0, "disk_capacity": 1}
        for i, (b, rack, group, ro) in enumerate(rows)], schema=TABLES["bookies"])
    policies = pa.Table.from_pylist([
        {"namespace": "t/ns-a", "primary_groups": ["g1"], "secondary_groups": [],
         "strict": strict, "ensemble_size": None, "write_quorum": None, "ack_quorum": None}],
        schema=TABLES["policies"])
    config = pa.Table.from_pylist([
        {"placement_mode": "rack-aware", "min_racks": 2, "enforce_min_racks": False,
         "strict_bookie_affinity": False, "isolation_groups": [],
         "secondary_isolation_groups": [], "regions_to_write": [], "min_regions": 2}],
        schema=TABLES["config"])
    return build_placement_inputs(bookies, policies, config)


ROWS = [("a1", "/r1", "g1", False), ("a2", "/r2", "g1", False), ("a3", "/r2", "g1", True),
        ("b1", "/r3", "g2", False), ("u1", None, None, False)]


def test_read_only_member_is_replaced_inside_the_group() -> None:
    c = cluster([*ROWS, ("a4", "/r3", "g1", False)], strict=True)
    plan = plan_fragment(c, 7, 0, [0, 2], write_quorum=2, ack_quorum=2, policy=0, nbytes=100)
    assert plan.remaining == Violation.NONE and plan.reason == ""
    (move,) = plan.moves
    assert (move.position, c.bookie_ids[move.bookie_out]) == (1, "a3")
    assert c.bookie_ids[move.bookie_in] in {"a2", "a4"}  # never b1 (other group) or u1
    assert move.bytes == 100


def test_unfixable_under_strict_says_why() -> None:
    c = cluster(ROWS, strict=True)  # g1 has writable bookies on /r1 and /r2 only
    plan = plan_fragment(c, 7, 0, [0, 2, 3], write_quorum=3, ack_quorum=2, policy=0,
                         nbytes=10)
    assert plan.remaining, plan
    assert "Not enough bookies" in plan.reason or "b1" in plan.reason
    assert all(c.bookie_ids[m.bookie_in] in {"a1", "a2"} for m in plan.moves)


def test_non_strict_may_fall_back_to_an_ungrouped_bookie() -> None:
    c = cluster(ROWS, strict=False)
    plan = plan_fragment(c, 7, 0, [0, 2, 3], write_quorum=3, ack_quorum=2, policy=0,
                         nbytes=10)
    assert plan.remaining == Violation.NONE, plan.reason
    assert {c.bookie_ids[b] for b in plan.ensemble} == {"a1", "a2", "u1"}
