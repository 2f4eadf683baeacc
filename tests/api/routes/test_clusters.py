"""`/admin/v2/clusters`: status codes and reasons as upstream, JSON as stored at Pulsar's keys."""

from __future__ import annotations

import httpx
import pytest

from tests.support import RawEtcd
from tests.zookeeper import ON_BOTH_STORES

pytestmark = ON_BOTH_STORES  # the routes on etcd and on ZooKeeper

CLUSTERS = "/admin/v2/clusters"
US_WEST = {
    "serviceUrl": "http://pulsar.example.com:8080",
    "brokerServiceUrl": "pulsar://pulsar.example.com:6650",
}
DEFAULTS = {
    "brokerClientTlsEnabled": False,
    "tlsAllowInsecureConnection": False,
    "brokerClientTlsEnabledWithKeyStore": False,
}  # ClusterDataImpl read from JSON: no builder defaults (JKS stores are the builder's)
POLICY = {
    "namespaces": ["my-tenant/isolated-.*"],
    "primary": ["broker-1.*"],
    "secondary": [],
    "auto_failover_policy": {
        "policy_type": "min_available",
        "parameters": {"min_limit": "1", "usage_threshold": "80"},
    },
}


def create(admin: httpx.Client, name: str, data: object = None) -> httpx.Response:
    return admin.put(f"{CLUSTERS}/{name}", json=US_WEST if data is None else data)


def test_create_is_200_with_empty_body_and_stores_cluster_data(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    response = create(admin, "us-west")
    assert response.status_code == 200
    assert response.content == b""
    assert clean_store.get("/admin/clusters/us-west") == (
        b'{"serviceUrl":"http://pulsar.example.com:8080",'
        b'"brokerServiceUrl":"pulsar://pulsar.example.com:6650",'
        b'"brokerClientTlsEnabled":false,"tlsAllowInsecureConnection":false,'
        b'"brokerClientTlsEnabledWithKeyStore":false}'
    )
    assert admin.get(f"{CLUSTERS}/us-west").json() == {**US_WEST, **DEFAULTS}


def test_create_twice_is_409(admin: httpx.Client) -> None:
    assert create(admin, "us-west").status_code == 200
    response = create(admin, "us-west", {"serviceUrl": "http://other:8080"})
    assert response.status_code == 409
    assert response.json() == {"reason": "Cluster already exists"}
    assert admin.get(f"{CLUSTERS}/us-west").json()["serviceUrl"] == US_WEST["serviceUrl"]


@pytest.mark.parametrize("name", ["bad!name", "a b", "caf\u00e9", "a*"])
def test_invalid_name_is_412(admin: httpx.Client, clean_store: RawEtcd, name: str) -> None:
    response = create(admin, name)
    assert response.status_code == 412, response.text
    assert response.json() == {"reason": "Cluster name is not valid"}
    assert clean_store.keys("/admin/clusters") == []


def test_name_with_allowed_punctuation_is_accepted(admin: httpx.Client) -> None:
    assert create(admin, "a-b=c:d.e_f9").status_code == 200
    assert admin.get(CLUSTERS).json() == ["a-b=c:d.e_f9"]


def test_missing_body_is_400(admin: httpx.Client, clean_store: RawEtcd) -> None:
    for response in (admin.put(f"{CLUSTERS}/c1"), admin.post(f"{CLUSTERS}/c1")):
        assert response.status_code == 400
        assert response.json() == {"reason": "cluster data is required"}
    assert clean_store.keys("/admin/clusters") == []


@pytest.mark.parametrize(
    ("field", "url", "reason"),
    [
        (
            "serviceUrl",
            "https://h:8443",
            "Illegal service url, example: http://pulsar.example.com:8080",
        ),
        ("serviceUrl", "h:8080", "Illegal service url, example: http://pulsar.example.com:8080"),
        (
            "serviceUrl",
            "http://bad host",
            "Illegal service url, example: http://pulsar.example.com:8080",
        ),
        ("serviceUrl", "", "Illegal service url, example: http://pulsar.example.com:8080"),
        ("serviceUrl", "http://", "Illegal service url, example: http://pulsar.example.com:8080"),
        (
            "serviceUrlTls",
            "http://h:8443",
            "Illegal service tls url, example: https://pulsar.example.com:8443",
        ),
        (
            "brokerServiceUrl",
            "http://h:6650",
            "Illegal broker service url, example: pulsar://pulsar.example.com:6650",
        ),
        (
            "brokerServiceUrlTls",
            "pulsar://h:6651",
            "Illegal broker service tls url, example: pulsar+ssl://pulsar.example.com:6651",
        ),
        (
            "proxyServiceUrl",
            "http://proxy:4080",
            "Illegal proxy service url, example: pulsar+ssl://ats-proxy.example.com:4443 "
            "or pulsar://ats-proxy.example.com:4080",
        ),
    ],
)
def test_illegal_url_is_400_on_create_and_update(
    admin: httpx.Client, clean_store: RawEtcd, field: str, url: str, reason: str
) -> None:
    response = create(admin, "c1", {field: url})
    assert response.status_code == 400
    assert response.json() == {"reason": reason}
    assert clean_store.get("/admin/clusters/c1") is None

    create(admin, "c2")
    response = admin.post(f"{CLUSTERS}/c2", json={field: url})
    assert response.status_code == 400
    assert response.json() == {"reason": reason}
    assert admin.get(f"{CLUSTERS}/c2").json()["serviceUrl"] == US_WEST["serviceUrl"]


def test_accepted_urls(admin: httpx.Client) -> None:
    data = {
        "serviceUrl": "http://h1:8080,h2:8080",
        "serviceUrlTls": "https://h:8443",
        "brokerServiceUrl": "pulsar://h1:6650,h2:6650",
        "brokerServiceUrlTls": "pulsar+ssl://h:6651",
        "proxyServiceUrl": "pulsar+ssl://proxy:4443",
        "proxyProtocol": "SNI",
    }
    assert create(admin, "c1", data).status_code == 200
    assert admin.get(f"{CLUSTERS}/c1").json() == {**data, **DEFAULTS}
    assert create(admin, "c2", {"proxyServiceUrl": "pulsar://proxy:4080"}).status_code == 200


def test_no_urls_at_all_is_accepted(admin: httpx.Client, clean_store: RawEtcd) -> None:
    assert create(admin, "bare", {}).status_code == 200
    assert clean_store.get_json("/admin/clusters/bare") == DEFAULTS


def test_unknown_proxy_protocol_reads_as_null(admin: httpx.Client) -> None:
    assert create(admin, "c1", {**US_WEST, "proxyProtocol": "HTTP"}).status_code == 200
    assert "proxyProtocol" not in admin.get(f"{CLUSTERS}/c1").json()


def test_malformed_and_mistyped_bodies_are_400_and_change_nothing(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    headers = {"Content-Type": "application/json"}
    for body in (b"{not json", b'{"serviceUrl": 5}', b'{"peerClusterNames": "a"}', b"[1]"):
        response = admin.put(f"{CLUSTERS}/c1", content=body, headers=headers)
        assert response.status_code == 400, body
        assert isinstance(response.json()["reason"], str)
    assert clean_store.keys("/admin/clusters") == []


def test_get_unknown_cluster_is_404(admin: httpx.Client) -> None:
    response = admin.get(f"{CLUSTERS}/nope")
    assert response.status_code == 404
    assert response.json() == {"reason": "Cluster does not exist"}


def test_list_is_in_hash_set_order_and_hides_global(admin: httpx.Client) -> None:
    """`getClusters` collects the names into a `java.util.HashSet`: its order, not sorted."""
    assert admin.get(CLUSTERS).json() == []
    for name in ("zeta", "global", "alpha", "mid"):
        assert create(admin, name).status_code == 200
    assert admin.get(CLUSTERS).json() == ["zeta", "alpha", "mid"]
    assert admin.get(f"{CLUSTERS}/global").status_code == 200


def test_update_is_a_full_replace(admin: httpx.Client, clean_store: RawEtcd) -> None:
    create(
        admin, "us-west", {**US_WEST, "authenticationPlugin": "p", "brokerClientTlsEnabled": True}
    )
    response = admin.post(f"{CLUSTERS}/us-west", json={"serviceUrl": "http://new:8080"})
    assert response.status_code == 200
    assert response.content == b""
    assert clean_store.get_json("/admin/clusters/us-west") == {
        "serviceUrl": "http://new:8080",
        **DEFAULTS,
    }


def test_update_unknown_cluster_is_404(admin: httpx.Client, clean_store: RawEtcd) -> None:
    response = admin.post(f"{CLUSTERS}/nope", json=US_WEST)
    assert response.status_code == 404
    assert response.json() == {"reason": "Cluster does not exist"}
    assert clean_store.get("/admin/clusters/nope") is None


def test_delete_is_204_and_removes_every_key_of_the_cluster(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    create(admin, "us-west")
    create(admin, "us-east")
    domain = f"{CLUSTERS}/us-west/failureDomains/domain-a"
    assert admin.post(domain, json={"brokers": ["b1:8080"]}).status_code == 204
    policy = f"{CLUSTERS}/us-west/namespaceIsolationPolicies/p1"
    assert admin.post(policy, json=POLICY).status_code == 204
    assert admin.delete(policy).status_code == 204  # leaves an empty record behind
    assert clean_store.get_json("/admin/clusters/us-west/namespaceIsolationPolicies") == {}
    assert admin.post(f"{CLUSTERS}/us-east/failureDomains/d", json={}).status_code == 204

    response = admin.delete(f"{CLUSTERS}/us-west")
    assert response.status_code == 204
    assert response.content == b""
    assert clean_store.keys("/admin/clusters/us-west") == []
    assert admin.get(CLUSTERS).json() == ["us-east"]
    assert sorted(clean_store.keys("/admin/clusters/us-east")) == [
        "/admin/clusters/us-east",
        "/admin/clusters/us-east/failureDomain/d",
    ]


def test_delete_unknown_cluster_is_404(admin: httpx.Client) -> None:
    response = admin.delete(f"{CLUSTERS}/nope")
    assert response.status_code == 404
    assert response.json() == {"reason": "Cluster does not exist"}


def test_delete_is_412_while_a_v1_namespace_lives_under_it(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    """Pulsar 4.0's `isClusterUsedAsync` looks for v1 namespaces (`tenant/cluster/ns`) only:
    a v2 namespace replicating to the cluster does not keep it from being deleted."""
    create(admin, "us-west")
    clean_store.put("/admin/policies/t1", {"adminRoles": [], "allowedClusters": ["us-west"]})
    clean_store.put("/admin/policies/t1/us-west/ns1", {"replication_clusters": ["us-west"]})
    response = admin.delete(f"{CLUSTERS}/us-west")
    assert response.status_code == 412
    assert response.json() == {"reason": "Cluster not empty"}
    assert clean_store.get("/admin/clusters/us-west") is not None

    clean_store.delete("/admin/policies/t1/us-west/ns1")
    clean_store.put("/admin/policies/t1/ns1", {"replication_clusters": ["us-east", "us-west"]})
    assert admin.delete(f"{CLUSTERS}/us-west").status_code == 204
    assert clean_store.get("/admin/policies/t1/ns1") is not None


def test_delete_is_412_while_isolation_policies_exist(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    create(admin, "us-west")
    policy = f"{CLUSTERS}/us-west/namespaceIsolationPolicies/p1"
    assert admin.post(policy, json=POLICY).status_code == 204
    response = admin.delete(f"{CLUSTERS}/us-west")
    assert response.status_code == 412
    assert response.json() == {"reason": "Cluster not empty"}
    assert admin.get(policy).status_code == 200


def test_delete_does_not_touch_a_cluster_whose_name_extends_it(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    create(admin, "us")
    create(admin, "us-west")
    assert admin.post(f"{CLUSTERS}/us-west/failureDomains/d", json={}).status_code == 204
    assert admin.delete(f"{CLUSTERS}/us").status_code == 204
    assert sorted(clean_store.keys("/admin/clusters")) == [
        "/admin/clusters/us-west",
        "/admin/clusters/us-west/failureDomain/d",
    ]


def test_encoded_slash_in_a_name_is_an_invalid_name_not_a_missing_route(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    response = admin.put("/admin/v2/clusters/a%2Fb", json={})
    assert response.status_code == 412
    assert response.json() == {"reason": "Cluster name is not valid"}
    assert clean_store.keys("/admin/clusters") == []


def test_peer_clusters(admin: httpx.Client, clean_store: RawEtcd) -> None:
    """`ClustersBase.getPeerCluster` / `setPeerClusterNames`: each peer must exist and must
    not be the cluster itself (any case), the list keeps its order without duplicates, null
    or empty clears it, and the rest of the cluster's data is unchanged."""
    create(admin, "us-west", US_WEST)
    create(admin, "us-east")
    create(admin, "eu")
    peers = f"{CLUSTERS}/us-west/peers"
    first = admin.get(peers)
    assert (first.status_code, first.content) == (200, b"")
    for body, reason in ((["us-east", "nope"], "Peer cluster nope does not exist"),
                         (["US-WEST"], "us-west itself can't be part of peer-list")):
        response = admin.post(peers, json=body)
        assert (response.status_code, response.json()) == (412, {"reason": reason})
    missing = admin.post(f"{CLUSTERS}/nope/peers", json=["us-east"])
    assert (missing.status_code, missing.json()) == (404, {"reason": "Cluster does not exist"})
    assert admin.get(f"{CLUSTERS}/nope/peers").status_code == 404

    assert admin.post(peers, json=["us-east", "eu", "us-east"]).status_code == 204
    assert admin.get(peers).json() == ["us-east", "eu"]
    stored = clean_store.get_json("/admin/clusters/us-west")
    assert stored["peerClusterNames"] == ["us-east", "eu"]
    assert stored["serviceUrl"] == US_WEST["serviceUrl"]
    assert admin.post(peers, json=[]).status_code == 204  # an empty set, kept
    assert admin.get(peers).json() == []
    assert admin.post(peers, content=b"null",
                      headers={"Content-Type": "application/json"}).status_code == 204
    cleared = admin.get(peers)
    assert (cleared.status_code, cleared.content) == (200, b"")
    assert "peerClusterNames" not in clean_store.get_json("/admin/clusters/us-west")
