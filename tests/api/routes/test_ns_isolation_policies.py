"""`/admin/v2/clusters/{c}/namespaceIsolationPolicies`: codes and reasons as upstream (including
the 404-vs-412 inconsistency), the map stored at Pulsar's key, the broker views."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from tests.support import RawEtcd
from tests.zookeeper import ON_BOTH_STORES

pytestmark = ON_BOTH_STORES  # the routes on etcd and on ZooKeeper

BASE = "/admin/v2/clusters/us-west/namespaceIsolationPolicies"
RECORD = "/admin/clusters/us-west/namespaceIsolationPolicies"
POLICY: dict[str, Any] = {
    "namespaces": ["my-tenant/isolated-.*"],
    "primary": ["broker-[0-1]:8080"],
    "secondary": ["broker-2:8080"],
    "auto_failover_policy": {
        "policy_type": "min_available",
        "parameters": {"min_limit": "1", "usage_threshold": "80"},
    },
}


@pytest.fixture
def cluster(admin: httpx.Client) -> str:
    assert admin.put("/admin/v2/clusters/us-west", json={}).status_code == 200
    return "us-west"


def policy(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(POLICY)
    data.update(changes)
    return {k: v for k, v in data.items() if v is not ...}


def test_set_and_get_policy(admin: httpx.Client, clean_store: RawEtcd, cluster: str) -> None:
    response = admin.post(f"{BASE}/pol-1", json=POLICY)
    assert response.status_code == 204
    assert response.content == b""
    assert admin.get(f"{BASE}/pol-1").json() == POLICY
    assert admin.get(BASE).json() == {"pol-1": POLICY}
    assert clean_store.get(RECORD) == (
        b'{"pol-1":{"namespaces":["my-tenant/isolated-.*"],"primary":["broker-[0-1]:8080"],'
        b'"secondary":["broker-2:8080"],"auto_failover_policy":{"parameters":{"min_limit":"1",'
        b'"usage_threshold":"80"},"policy_type":"min_available"}}}'
    )


def test_unload_scope_is_kept_and_unknown_scope_reads_as_null(
    admin: httpx.Client, clean_store: RawEtcd, cluster: str
) -> None:
    admin.post(f"{BASE}/a", json=policy(unload_scope="all_matching"))
    admin.post(f"{BASE}/b", json=policy(unload_scope="bogus"))
    stored = clean_store.get_json(RECORD)
    assert stored["a"]["unload_scope"] == "all_matching"
    assert "unload_scope" not in stored["b"]
    assert list(stored) == ["a", "b"]


def test_policies_keep_the_stored_order(
    admin: httpx.Client, clean_store: RawEtcd, cluster: str
) -> None:
    """Pulsar reads the map into a `LinkedHashMap`: a new policy goes last, a replaced one
    stays where it was, and the list answers in that order (not sorted)."""
    for name in ("zeta", "alpha", "mid"):
        assert admin.post(f"{BASE}/{name}", json=POLICY).status_code == 204
    assert admin.post(f"{BASE}/zeta", json=policy(secondary=[])).status_code == 204
    assert list(clean_store.get_json(RECORD)) == ["zeta", "alpha", "mid"]
    assert list(admin.get(BASE).json()) == ["zeta", "alpha", "mid"]
    assert admin.delete(f"{BASE}/alpha").status_code == 204
    assert list(admin.get(BASE).json()) == ["zeta", "mid"]


def test_stored_record_that_is_not_json_is_500_with_the_key_and_stays(
    admin: httpx.Client, clean_store: RawEtcd, cluster: str
) -> None:
    clean_store.put(RECORD, b"not json")
    reason = {"reason": f"Failed to deserialize payload for key '{RECORD}'"}
    for response in (
        admin.get(BASE),
        admin.get(f"{BASE}/p"),
        admin.post(f"{BASE}/p", json=POLICY),
        admin.delete(f"{BASE}/p"),
    ):
        assert (response.status_code, response.json()) == (500, reason)
    assert clean_store.get(RECORD) == b"not json"


def test_numeric_parameters_are_stored_as_strings(
    admin: httpx.Client, clean_store: RawEtcd, cluster: str
) -> None:
    body = policy(
        auto_failover_policy={
            "policy_type": "min_available",
            "parameters": {"min_limit": 3, "usage_threshold": 80},
        }
    )
    assert admin.post(f"{BASE}/p", json=body).status_code == 204
    assert clean_store.get_json(RECORD)["p"]["auto_failover_policy"]["parameters"] == {
        "min_limit": "3",
        "usage_threshold": "80",
    }


def test_post_replaces_a_policy_and_keeps_the_others(admin: httpx.Client, cluster: str) -> None:
    admin.post(f"{BASE}/a", json=POLICY)
    admin.post(f"{BASE}/b", json=POLICY)
    admin.post(f"{BASE}/a", json=policy(namespaces=["other/.*"]))
    policies = admin.get(BASE).json()
    assert policies["a"]["namespaces"] == ["other/.*"]
    assert policies["b"] == POLICY


@pytest.mark.parametrize(
    "body",
    [
        policy(namespaces=...),
        policy(namespaces=[]),
        policy(primary=...),
        policy(primary=[]),
        policy(secondary=...),
        policy(primary=["broker-[0-1"]),
        policy(secondary=["(unclosed"]),
        policy(auto_failover_policy=...),
        policy(
            auto_failover_policy={
                "policy_type": "other",
                "parameters": {"min_limit": "1", "usage_threshold": "80"},
            }
        ),
        policy(auto_failover_policy={"policy_type": "min_available"}),
        policy(
            auto_failover_policy={"policy_type": "min_available", "parameters": {"min_limit": "1"}}
        ),
        policy(
            auto_failover_policy={
                "policy_type": "min_available",
                "parameters": {"min_limit": "x", "usage_threshold": "80"},
            }
        ),
        policy(
            auto_failover_policy={
                "policy_type": "min_available",
                "parameters": {"min_limit": "1", "usage_threshold": "1.5"},
            }
        ),
    ],
)
def test_invalid_policy_is_400_and_writes_nothing(
    admin: httpx.Client, clean_store: RawEtcd, cluster: str, body: dict[str, Any]
) -> None:
    response = admin.post(f"{BASE}/p", json=body)
    assert response.status_code == 400
    assert response.json()["reason"].startswith(
        "Invalid format of input policy data. policy: p; data: {\n"
    )
    assert clean_store.get(RECORD) is None


def test_invalid_policy_reason_renders_data_as_jackson_does(
    admin: httpx.Client, cluster: str
) -> None:
    body = {
        "namespaces": ["t/ns.*"],
        "primary": ["b1"],
        "auto_failover_policy": {
            "policy_type": "MIN_AVAILABLE",
            "parameters": {"min_limit": "1", "usage_threshold": "80"},
        },
        "unknown": 1,
    }
    response = admin.post(f"{BASE}/pol-x", json=body)
    assert response.status_code == 400
    assert response.json() == {
        "reason": "Invalid format of input policy data. policy: pol-x; data: {\n"
        '  "namespaces" : [ "t/ns.*" ],\n'
        '  "primary" : [ "b1" ],\n'
        '  "secondary" : null,\n'
        '  "auto_failover_policy" : {\n'
        '    "parameters" : {\n'
        '      "min_limit" : "1",\n'
        '      "usage_threshold" : "80"\n'
        "    },\n"
        '    "policy_type" : null\n'
        "  },\n"
        '  "unload_scope" : null\n'
        "}"
    }


def test_missing_body_is_400_with_null_data(admin: httpx.Client, cluster: str) -> None:
    response = admin.post(f"{BASE}/p")
    assert response.status_code == 400
    assert response.json() == {
        "reason": "Invalid format of input policy data. policy: p; data: null"
    }


def test_mistyped_body_is_400_and_writes_nothing(
    admin: httpx.Client, clean_store: RawEtcd, cluster: str
) -> None:
    headers = {"Content-Type": "application/json"}
    for body in (b"{bad", b'{"namespaces": "a"}', b'{"auto_failover_policy": []}'):
        response = admin.post(f"{BASE}/p", content=body, headers=headers)
        assert response.status_code == 400, body
        assert "reason" in response.json()
    assert clean_store.get(RECORD) is None


def test_unknown_cluster_is_404_on_list_and_412_elsewhere(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    base = "/admin/v2/clusters/nope/namespaceIsolationPolicies"
    response = admin.get(base)
    assert response.status_code == 404
    assert response.json() == {"reason": "Cluster nope does not exist."}
    for response in (
        admin.get(f"{base}/p"),
        admin.post(f"{base}/p", json=POLICY),
        admin.delete(f"{base}/p"),
        admin.get(f"{base}/brokers"),
        admin.get(f"{base}/brokers/b1:8080"),
    ):
        assert response.status_code == 412, response.request.url
        assert response.json() == {"reason": "Cluster nope does not exist."}
    assert clean_store.keys("/admin/clusters") == []


def test_reads_before_any_write_are_404(admin: httpx.Client, cluster: str) -> None:
    reason = {"reason": "NamespaceIsolationPolicies for cluster us-west does not exist"}
    for path in (BASE, f"{BASE}/p", f"{BASE}/brokers", f"{BASE}/brokers/b1:8080"):
        response = admin.get(path)
        assert response.status_code == 404, path
        assert response.json() == reason


def test_unknown_policy_is_404(admin: httpx.Client, cluster: str) -> None:
    admin.post(f"{BASE}/a", json=POLICY)
    response = admin.get(f"{BASE}/nope")
    assert response.status_code == 404
    assert response.json() == {
        "reason": "Cannot find NamespaceIsolationPolicy nope for cluster us-west"
    }


def test_delete_creates_the_empty_record_and_is_204_for_unknown_policy(
    admin: httpx.Client, clean_store: RawEtcd, cluster: str
) -> None:
    response = admin.delete(f"{BASE}/nope")
    assert response.status_code == 204
    assert clean_store.get(RECORD) == b"{}"
    assert admin.get(BASE).json() == {}


def test_delete_removes_only_that_policy(
    admin: httpx.Client, clean_store: RawEtcd, cluster: str
) -> None:
    admin.post(f"{BASE}/a", json=POLICY)
    admin.post(f"{BASE}/b", json=POLICY)
    assert admin.delete(f"{BASE}/a").status_code == 204
    assert list(clean_store.get_json(RECORD)) == ["b"]


def test_brokers_view_lists_registered_brokers(
    admin: httpx.Client, clean_store: RawEtcd, cluster: str
) -> None:
    admin.post(f"{BASE}/pol-1", json=POLICY)
    for broker in ("broker-0:8080", "broker-2:8080", "broker-9:8080"):
        clean_store.put(f"/loadbalance/brokers/{broker}", b"{}")
    response = admin.get(f"{BASE}/brokers")
    assert response.status_code == 200
    assert response.json() == [  # the available brokers' HashSet order, as the broker's
        {
            "brokerName": "broker-2:8080",
            "policyName": "pol-1",
            "primary": False,
            "namespaceRegex": ["my-tenant/isolated-.*"],
        },
        {"brokerName": "broker-9:8080", "primary": False, "namespaceRegex": []},
        {
            "brokerName": "broker-0:8080",
            "policyName": "pol-1",
            "primary": True,
            "namespaceRegex": ["my-tenant/isolated-.*"],
        },
    ]


def test_broker_view_needs_a_full_match(admin: httpx.Client, cluster: str) -> None:
    admin.post(f"{BASE}/pol-1", json=POLICY)
    assert admin.get(f"{BASE}/brokers/broker-1:8080").json() == {
        "brokerName": "broker-1:8080",
        "policyName": "pol-1",
        "primary": True,
        "namespaceRegex": ["my-tenant/isolated-.*"],
    }
    assert admin.get(f"{BASE}/brokers/broker-1:80801").json() == {
        "brokerName": "broker-1:80801",
        "primary": False,
        "namespaceRegex": [],
    }


def test_broker_in_several_policies_collects_their_namespaces(
    admin: httpx.Client, cluster: str
) -> None:
    admin.post(f"{BASE}/a", json=policy(namespaces=["t/a"], primary=["b1:8080"], secondary=[]))
    admin.post(f"{BASE}/b", json=policy(namespaces=["t/b"], primary=["x"], secondary=["b1:.*"]))
    assert admin.get(f"{BASE}/brokers/b1:8080").json() == {
        "brokerName": "b1:8080",
        "policyName": "b",
        "primary": False,
        "namespaceRegex": ["t/a", "t/b"],
    }
