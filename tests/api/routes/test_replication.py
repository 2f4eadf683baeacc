"""`/admin/v2/namespaces/{tenant}/{namespace}/replication`: get and set a namespace's
replication clusters, with upstream's checks and reasons."""

from __future__ import annotations

import httpx

from tests.factories import add_cluster, assert_reason, make_namespace
from tests.support import RawEtcd

URL = "/admin/v2/namespaces/acme/ns1/replication"


def test_set_and_get_keep_every_other_field(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store, clusters=("test", "west"))
    assert admin.get(URL).json() == ["test"]
    stored = clean_store.get_json("/admin/policies/acme/ns1")
    clean_store.put("/admin/policies/acme/ns1", {**stored, "message_ttl_in_seconds": 60})
    response = admin.post(URL, json=["west", "test", "west"])
    assert response.status_code == 200 and response.content == b""  # the broker's answer
    # a Java HashSet<String>: duplicates collapse, written in its iteration order
    assert admin.get(URL).json() == ["test", "west"]
    stored = clean_store.get_json("/admin/policies/acme/ns1")
    assert stored["replication_clusters"] == ["test", "west"]
    assert stored["message_ttl_in_seconds"] == 60 and stored["bundles"]["numBundles"] == 4


def test_upstream_checks_in_order(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store, clusters=("test",))
    add_cluster(clean_store, "east")
    assert_reason(admin.post(URL, json=[]), 412, "ClusterIds should not be null or empty")
    assert_reason(admin.post(URL), 412, "ClusterIds should not be null or empty")
    assert_reason(
        admin.post(URL, json=["test", "global"]),
        412,
        "Cannot specify global in the list of replication clusters",
    )
    assert_reason(admin.post(URL, json=["test", "nope"]), 403, "Invalid cluster id: nope")
    assert_reason(
        admin.post(URL, json=["east"]),
        403,
        "Cluster [east] is not in the list of allowed clusters list for tenant [acme]",
    )
    clean_store.put("/admin/clusters/test", {"peerClusterNames": ["east", "far"]})
    # the ids are checked in HashSet order ("east", then "test"), whatever the body's order:
    # east is not allowed for the tenant before test's peers conflict
    for body in (["test", "east"], ["east", "test"]):
        assert_reason(
            admin.post(URL, json=body),
            403,
            "Cluster [east] is not in the list of allowed clusters list for tenant [acme]",
        )
    stored = clean_store.get_json("/admin/policies/acme")
    clean_store.put("/admin/policies/acme", {**stored, "allowedClusters": ["test", "east"]})
    assert_reason(
        admin.post(URL, json=["test", "east"]),
        409,
        "test's peer-clusters [east] can't be part of replication-clusters [east, test]",
    )
    assert_reason(
        admin.post("/admin/v2/namespaces/acme/absent/replication", json=["test"]),
        404,
        "Namespace does not exist",
    )
    assert_reason(admin.get("/admin/v2/namespaces/acme/absent/replication"), 404,
                  "Namespace does not exist")  # fmt: skip
    assert clean_store.get_json("/admin/policies/acme/ns1")["replication_clusters"] == ["test"]


def test_namespace_allowed_clusters_win_over_the_tenant(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store, clusters=("test", "west"))
    stored = clean_store.get_json("/admin/policies/acme/ns1")
    clean_store.put("/admin/policies/acme/ns1", {**stored, "allowed_clusters": ["test"]})
    assert_reason(
        admin.post(URL, json=["west"]),
        403,
        "Cluster [west] is not in the list of allowed clusters list for namespace [acme/ns1]",
    )
    assert admin.post(URL, json=["test"]).status_code == 200
