"""The numpy batch check agrees with the scalar check on every fragment."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement import AffinityGroups, PlacementConfig, PlacementMode, Topology
from placement.batch import BatchTopology, PolicyTable, check_batch
from placement.violations import Violation, check_fragment
from tests.factories import PLACEMENT_GROUPS, DrawnCluster, drawn_clusters

group_lists = st.lists(st.sampled_from((*PLACEMENT_GROUPS, "*")), max_size=2,
                       unique=True).map(tuple)
affinities = st.one_of(st.none(), st.builds(AffinityGroups, group_lists, group_lists,
                                            st.booleans()))


@st.composite
def cases(draw: st.DrawFn) -> tuple[object, ...]:
    cluster = draw(drawn_clusters(max_bookies=12))
    n = len(cluster.bookies)
    config = PlacementConfig(
        regionaware_policy_enabled=cluster.mode is PlacementMode.REGION,
        min_num_racks_per_write_quorum=draw(st.integers(0, 4)),
        enforce_min_num_racks_per_write_quorum=draw(st.booleans()),
        isolation_groups=draw(group_lists),
        secondary_isolation_groups=draw(group_lists),
        strict_bookie_affinity_enabled=draw(st.booleans()),
        regions_to_write=draw(st.sampled_from(((), ("e0", "e1"), ("e0", "e1", "e2")))),
        minimum_regions_for_durability=2,
    )
    policies = draw(st.lists(affinities, min_size=1, max_size=4))
    rows = draw(st.lists(st.tuples(
        st.lists(st.integers(0, n - 1), min_size=0, max_size=6),
        st.integers(0, 6), st.integers(0, 6), st.integers(0, len(policies) - 1)),
        min_size=1, max_size=30))
    return cluster, config, policies, rows


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_batch_agrees_with_scalar(case: tuple[object, ...]) -> None:
    cluster, config, policies, rows = case
    assert isinstance(cluster, DrawnCluster) and isinstance(config, PlacementConfig)
    assert isinstance(policies, list) and isinstance(rows, list)
    topology, bookies = cluster.topology(), cluster.bookies
    table = BatchTopology.from_topology(topology, bookies, PLACEMENT_GROUPS)
    ptable = PolicyTable.build(policies, config, table.groups)
    emax = max(1, *(len(r[0]) for r in rows))
    ens = np.full((len(rows), emax), -1, np.int32)
    for i, (members, *_rest) in enumerate(rows):
        ens[i, : len(members)] = members
    verdicts, kinds = check_batch(table, ptable, config, ens, [r[1] for r in rows],
                                  [r[2] for r in rows], [r[3] for r in rows])
    for i, (members, qw, qa, p) in enumerate(rows):
        want = check_fragment(topology, [bookies[m] for m in members], qw, qa, config,
                              affinity=policies[p])
        assert (Violation(int(kinds[i])), int(verdicts[i])) == (
            want.violations, int(want.adherence)), (members, qw, qa, policies[p], want)


def test_zone_mode_is_refused() -> None:
    topology = Topology.build({}, ["a:1"], mode=PlacementMode.ZONE)
    table = BatchTopology.from_topology(topology, ["a:1"])
    cfg = PlacementConfig(zoneaware_policy_enabled=True)
    with pytest.raises(ValueError, match="rack- and region-aware"):
        check_batch(table, PolicyTable.build([None], cfg, table.groups), cfg,
                    np.zeros((1, 1), np.int32), [1], [1], [0])


def test_index_out_of_range_is_refused() -> None:
    topology = Topology.build({}, ["a:1"])
    table = BatchTopology.from_topology(topology, ["a:1"])
    cfg = PlacementConfig()
    with pytest.raises(ValueError, match="out of range"):
        check_batch(table, PolicyTable.build([None], cfg, table.groups), cfg,
                    np.array([[0, 1]], np.int32), [1], [1], [0])
