"""The isolation-aware adherence check of a stored fragment, kind by kind."""

from __future__ import annotations

from placement import Adherence, AffinityGroups, PlacementConfig, Topology
from placement.violations import Violation, check_fragment, kind_names

RACK_MAP = {
    "g1": {"a1:1": {"rack": "/r1"}, "a2:1": {"rack": "/r2"}, "a3:1": {"rack": "/r3"},
           "a4:1": {"rack": "/r1"}, "ad:1": {"rack": ""}},
    "g2": {"b1:1": {"rack": "/r1"}, "b2:1": {"rack": "/r2"}},
}
WRITABLE = ["a1:1", "a2:1", "a3:1", "a4:1", "ad:1", "b1:1", "b2:1", "u1:1"]
TOPO = Topology.build(RACK_MAP, WRITABLE, read_only=["a9:1"])
NS = AffinityGroups(("g1",))


def judge(ensemble: list[str], qw: int = 2, qa: int = 2, *, affinity: AffinityGroups | None = NS,
          **cfg: object) -> Violation:
    config = PlacementConfig(**cfg)  # type: ignore[arg-type]
    return check_fragment(TOPO, ensemble, qw, qa, config, affinity=affinity).violations


def test_clean_fragment_adheres_with_a_reason() -> None:
    got = check_fragment(TOPO, ["a1:1", "a2:1", "a3:1"], 3, 2, PlacementConfig(), affinity=NS)
    assert got.adherence is Adherence.MEETS_STRICT and got.violations == Violation.NONE
    assert got.reasons == ("adheres",)


def test_each_kind_alone() -> None:
    assert judge(["a1:1", "a4:1"]) == Violation.TOO_FEW_RACKS
    assert judge(["a1:1", "b2:1"]) == Violation.FOREIGN_GROUP
    assert judge(["a1:1", "ad:1"], enforce_min_num_racks_per_write_quorum=True) == (
        Violation.DEFAULT_RACK_UNDER_ENFORCE)
    assert judge(["a1:1", "ad:1"]) == Violation.NONE
    assert judge(["a1:1", "gone:1"]) == Violation.NOT_REGISTERED  # default rack: 2 racks
    assert judge(["a1:1", "a9:1"]) == Violation.READ_ONLY
    assert judge(["a1:1", "a1:1"]) == Violation.BAD_ENSEMBLE
    assert judge(["a1:1"], qw=2) == Violation.BAD_ENSEMBLE


def test_ungrouped_is_a_violation_only_under_strict() -> None:
    assert judge(["a1:1", "u1:1"]) == Violation.NONE  # non-strict fallback
    strict = AffinityGroups(("g1",), strict=True)
    got = check_fragment(TOPO, ["a1:1", "u1:1"], 2, 2, PlacementConfig(), affinity=strict)
    assert got.violations == Violation.UNGROUPED_UNDER_STRICT
    assert got.adherence is Adherence.FAIL
    assert "u1:1 has no group" in got.reasons[0]


def test_secondary_group_is_allowed_and_star_disables_isolation() -> None:
    assert judge(["a1:1", "b2:1"], affinity=AffinityGroups(("g1",), ("g2",))) == Violation.NONE
    assert judge(["a1:1", "b2:1"], affinity=AffinityGroups(("*",))) == Violation.NONE


def test_broker_defaults_apply_without_a_namespace_policy() -> None:
    assert judge(["a1:1", "b2:1"], affinity=None) == Violation.NONE
    assert judge(["a1:1", "b2:1"], affinity=None, isolation_groups=("g2",)) == (
        Violation.FOREIGN_GROUP)
    # strictBookieAffinityEnabled without groups: only ungrouped bookies are allowed
    assert judge(["u1:1", "b2:1"], affinity=None, strict_bookie_affinity_enabled=True) == (
        Violation.FOREIGN_GROUP)


def test_kinds_combine_and_have_names() -> None:
    kinds = judge(["a1:1", "a4:1", "b1:1"], qw=3, min_num_racks_per_write_quorum=2)
    assert kinds == Violation.TOO_FEW_RACKS | Violation.FOREIGN_GROUP
    assert kind_names(kinds) == ["TOO_FEW_RACKS", "FOREIGN_GROUP"]
