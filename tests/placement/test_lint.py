from placement import AffinityGroups, PlacementConfig, Topology
from placement.lint import (
    DEFAULT_RACK,
    DEPTH_MISMATCH,
    EMPTY_GROUP,
    INVALID_ID,
    SMALL_GROUP,
    STALE_RACK_ENTRY,
    TOO_FEW_RACKS,
    UNRACKED,
    LintWarning,
    NamespaceGroups,
    lint,
)

RACK_MAP = {
    "iso": {"a:1": {"rack": "/r1"}, "b:1": {"rack": "/r1/deep"}, "gone:1": {"rack": "/r2"}},
    "default": {"c:1": {"rack": "/"}},
}
REGISTERED = frozenset({"a:1", "b:1", "c:1", "d:1", "noport"})


def kinds(found: list[LintWarning]) -> list[tuple[str, str | None]]:
    return [(w.kind, w.bookie_id or w.group) for w in found]


def test_each_rule_names_what_it_is_about() -> None:
    topology = Topology.build(RACK_MAP, REGISTERED)
    namespaces = [NamespaceGroups("t/ns", AffinityGroups(("iso", "none")), ensemble_size=3)]
    found = lint(topology, RACK_MAP, REGISTERED,
                 PlacementConfig(min_num_racks_per_write_quorum=3), namespaces=namespaces)
    assert kinds(found) == [
        (INVALID_ID, "noport"),
        (UNRACKED, "d:1"), (UNRACKED, "noport"),
        (STALE_RACK_ENTRY, "gone:1"),
        (DEPTH_MISMATCH, "b:1"),
        (DEFAULT_RACK, "c:1"),
        (TOO_FEW_RACKS, None),
        (EMPTY_GROUP, "none"),
        (SMALL_GROUP, "iso,none"),
    ]  # fmt: skip
    assert found[-1].namespace == "t/ns" and "1 writable bookie(s)" in found[-1].message


def test_a_wildcard_group_disables_the_namespace_rules() -> None:
    topology = Topology.build(RACK_MAP, REGISTERED)
    namespaces = [NamespaceGroups("t/ns", AffinityGroups(("*",)), ensemble_size=3)]
    found = lint(topology, RACK_MAP, REGISTERED, PlacementConfig(), namespaces=namespaces)
    assert not [w for w in found if w.namespace]
