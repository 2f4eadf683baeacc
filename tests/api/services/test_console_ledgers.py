"""The console's judgement of many ledgers at once (`judge_many`: the batch check of
`placement.batch` first, `check_fragment` for the reasons) gives every ledger the verdict that
judging it alone (`judge`) gives: ledgers of several segments, bookies the topology does not
know, namespaces with and without their own groups, rack- and region-aware placement."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.services.console_ledgers import LedgerRecord, NamespacePolicy, judge, judge_many
from metastore.ledger_metadata import LedgerMetadata, LedgerState
from placement import AffinityGroups, EnsembleRequest, PlacementConfig, PlacementMode
from storage.ledger.metadata import managed_ledger_custom_metadata
from tests.factories import PLACEMENT_GROUPS, DrawnCluster, drawn_clusters

NAMESPACES = ("t/a", "t/b", "t/c")
group_lists = st.lists(st.sampled_from(PLACEMENT_GROUPS), max_size=2, unique=True).map(tuple)
affinities = st.one_of(st.none(), st.builds(AffinityGroups, group_lists, group_lists,
                                            st.booleans()))


@st.composite
def cases(draw: st.DrawFn) -> tuple[object, ...]:
    cluster = draw(drawn_clusters(max_bookies=10))
    pool = [*cluster.bookies, "unknown-1:3181", "unknown-2:3181"]
    config = PlacementConfig(
        regionaware_policy_enabled=cluster.mode is PlacementMode.REGION,
        min_num_racks_per_write_quorum=draw(st.integers(0, 3)),
        enforce_min_num_racks_per_write_quorum=draw(st.booleans()),
        strict_bookie_affinity_enabled=draw(st.booleans()),
        minimum_regions_for_durability=2,
    )
    namespaces = {
        name: NamespacePolicy(name, EnsembleRequest(2, 2, 2), draw(affinities), None)
        for name in NAMESPACES if draw(st.booleans())}
    ledgers = []
    for ledger_id in range(1, draw(st.integers(1, 25)) + 1):
        size = draw(st.integers(1, min(4, len(pool))))
        qw = draw(st.integers(1, size))
        qa = draw(st.integers(1, qw))
        segments = draw(st.lists(st.lists(st.sampled_from(pool), min_size=size, max_size=size,
                                          unique=True), min_size=1, max_size=3))
        topic = draw(st.sampled_from((*(f"{n}/persistent/x" for n in NAMESPACES), "")))
        ledgers.append((ledger_id, size, qw, qa, segments, topic))
    return cluster, config, namespaces, ledgers


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_many_at_once_agree_with_one_by_one(case: tuple[object, ...]) -> None:
    cluster, config, namespaces, ledgers = case
    assert isinstance(cluster, DrawnCluster)
    topology = cluster.topology()
    records = {}
    for ledger_id, size, qw, qa, segments, topic in ledgers:
        metadata = LedgerMetadata(
            ledger_id=ledger_id, ensemble_size=size, write_quorum_size=qw, ack_quorum_size=qa,
            ensembles={10 * i: tuple(s) for i, s in enumerate(segments)},
            state=LedgerState.OPEN,
            custom_metadata=managed_ledger_custom_metadata(topic, None) if topic else {})
        records[ledger_id] = LedgerRecord.of(metadata)
    assert isinstance(config, PlacementConfig) and isinstance(namespaces, dict)
    alone = {i: judge(r, topology, namespaces.get(r.namespace), config)
             for i, r in records.items()}
    assert judge_many(records, topology, namespaces, config, batch_from=1) == alone
