"""Namespace-to-broker assignment (§7) and the LoadManagerShared examples."""

from placement import (
    filter_anti_affinity,
    isolation_candidates,
    parse_policies,
    select_broker,
    should_unload_anti_affinity,
)

POLICIES = parse_policies({
    "pol": {
        "namespaces": ["my-tenant/isolated-.*"],
        "primary": ["broker-[0-1]\\..*"],
        "secondary": ["broker-2\\..*"],
        "auto_failover_policy": {"policy_type": "min_available",
                                 "parameters": {"min_limit": "1", "usage_threshold": "80"}},
    }
})
BROKERS = ["broker-0.a:8080", "broker-1.a:8080", "broker-2.a:8080", "broker-3.a:8080"]


def test_isolated_namespace_gets_primaries() -> None:
    got = isolation_candidates("my-tenant/isolated-x", BROKERS, POLICIES)
    assert got == {"broker-0.a:8080", "broker-1.a:8080"}


def test_failover_to_secondary_when_primaries_overloaded() -> None:
    loads = {"broker-0.a:8080": 90.0, "broker-1.a:8080": 85.0}
    got = isolation_candidates("my-tenant/isolated-x", BROKERS, POLICIES, loads)
    assert got == {"broker-0.a:8080", "broker-1.a:8080", "broker-2.a:8080"}
    got = isolation_candidates("my-tenant/isolated-x", BROKERS[2:], POLICIES)
    assert got == {"broker-2.a:8080"}


def test_other_namespaces_use_shared_brokers_only() -> None:
    got = isolation_candidates("other/ns", BROKERS, POLICIES)
    assert got == {"broker-2.a:8080", "broker-3.a:8080"}
    assert isolation_candidates("other/ns", BROKERS, ()) == set(BROKERS)


def test_namespace_regex_is_a_full_match() -> None:
    assert isolation_candidates("x/my-tenant/isolated-1", BROKERS, POLICIES) == {
        "broker-2.a:8080", "broker-3.a:8080"}


def test_doc_comment_example() -> None:
    counts = {"b1": 2, "b2": 1, "b3": 2, "b4": 1, "b5": 2, "b6": 2}
    domains = {"b1": "d1", "b2": "d1", "b3": "d2", "b4": "d2", "b5": "d3", "b6": "d3"}
    assert filter_anti_affinity(counts, counts, domains, True) == {"b2", "b4"}


def test_without_failure_domains_only_broker_step_runs() -> None:
    counts = {"b1": 1, "b2": 0}
    domains = {"b1": "d1", "b2": "d1", "b3": "d2"}
    assert filter_anti_affinity({"b1", "b2", "b3"}, counts, domains, False) == {"b2", "b3"}
    assert filter_anti_affinity({"b1", "b2"}, None, domains, True) == {"b1", "b2"}


def test_brokers_in_no_domain_pool_into_default() -> None:
    counts = {"b1": 1, "x": 0, "y": 0}
    domains = {"b1": "d1", "b2": "d1"}
    # d1 holds 1, the pooled "default" domain (x, y) holds 0
    assert filter_anti_affinity({"b1", "b2", "x", "y"}, counts, domains, True) == {"x", "y"}


def test_seed_two_domains_four_namespaces_one_per_broker() -> None:
    domains = {"d1": ["b1:8080", "b2:8080"], "d2": ["b3:8080", "b4:8080"]}
    brokers = [b for bs in domains.values() for b in bs]
    owned: dict[str, int] = {}
    placed: dict[str, str] = {}
    for ns in ("t/ns1", "t/ns2", "t/ns3", "t/ns4"):
        result = select_broker(ns, brokers, anti_affinity_counts=dict(owned),
                               failure_domains=domains, failure_domains_enabled=True)
        assert result.broker is not None
        placed[ns] = result.broker
        owned[result.broker] = owned.get(result.broker, 0) + 1
    assert sorted(placed.values()) == sorted(brokers)
    first_two = {placed["t/ns1"], placed["t/ns2"]}
    assert any(b in first_two for b in domains["d1"]) and any(b in first_two for b in domains["d2"])


def test_least_loaded_wins_among_candidates() -> None:
    r = select_broker("a/b", ["x:1", "y:1", "z:1"], loads={"x:1": 50, "y:1": 10, "z:1": 30})
    assert r.broker == "y:1"


def test_fewest_bundles_of_namespace_filters_before_load() -> None:
    r = select_broker("a/b", ["x:1", "y:1"], loads={"x:1": 50, "y:1": 10},
                      namespace_bundles={"y:1": 2})
    assert r.broker == "x:1"


def test_shedding_guard() -> None:
    assert should_unload_anti_affinity("b1", {"b1", "b2"}, None)
    assert should_unload_anti_affinity("b1", {"b1", "b2"}, {"b1": 2, "b2": 1})
    assert not should_unload_anti_affinity("b1", {"b1", "b2"}, {"b1": 1, "b2": 1})
    assert should_unload_anti_affinity("b1", {"b1", "b2"}, {"b1": 1})  # least is 0
