"""`/admin/v2/tenants`: behaviour, status codes and reasons as upstream, JSON as stored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from metastore.embedded import EmbeddedEtcd
from tests.factories import TENANTS, add_cluster, assert_reason, create_tenant
from tests.support import RawEtcd, ServerProcess


@pytest.fixture(scope="module")
def permissive_server(
    etcd: EmbeddedEtcd, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A second server on the same etcd: at most 2 tenants, forced deletes allowed."""
    conf = {
        "maxTenants": "2",
        "forceDeleteTenantAllowed": "true",
        "forceDeleteNamespaceAllowed": "true",
    }
    process = ServerProcess(etcd.url, Path(tmp_path_factory.mktemp("permissive")), extra_conf=conf)
    process.start()
    yield process
    process.stop()


@pytest.fixture
def permissive(permissive_server: ServerProcess, clean_store: RawEtcd) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=permissive_server.url, timeout=10) as client:
        yield client


def test_list_is_empty_then_sorted(admin: httpx.Client, clean_store: RawEtcd) -> None:
    assert admin.get(TENANTS).json() == []
    add_cluster(clean_store, "test")
    for name in ("zeta", "alpha", "mid"):
        assert create_tenant(admin, name, ["test"]).status_code == 204
    response = admin.get(TENANTS)
    assert response.status_code == 200
    assert response.json() == ["alpha", "mid", "zeta"]


def test_create_and_get_stores_tenant_info(admin: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "test")
    add_cluster(clean_store, "us-west")
    response = create_tenant(admin, "acme", ["test", "us-west", "test"], ["ops", "dev"])
    assert response.status_code == 204
    assert response.content == b""
    expected = {"adminRoles": ["ops", "dev"], "allowedClusters": ["test", "us-west"]}
    assert clean_store.get_json("/admin/policies/acme") == expected
    got = admin.get(f"{TENANTS}/acme")
    assert got.status_code == 200
    assert got.json() == expected


def test_a_set_not_given_is_not_written(admin: httpx.Client, clean_store: RawEtcd) -> None:
    """Jackson leaves TenantInfoImpl's `adminRoles` null when the body has none, and the
    broker writes the tenant without it; so does a create or an update here."""
    add_cluster(clean_store, "test")
    body = {"allowedClusters": ["test"]}
    assert admin.put(f"{TENANTS}/acme", json=body).status_code == 204
    assert clean_store.get("/admin/policies/acme") == b'{"allowedClusters":["test"]}'
    assert admin.post(f"{TENANTS}/acme", json={**body, "adminRoles": ["ops"]}).status_code == 204
    assert admin.post(f"{TENANTS}/acme", json=body).status_code == 204
    assert clean_store.get("/admin/policies/acme") == b'{"allowedClusters":["test"]}'
    assert admin.get(f"{TENANTS}/acme").json() == body


def test_get_unknown_tenant_is_404(admin: httpx.Client) -> None:
    assert_reason(admin.get(f"{TENANTS}/nope"), 404, "Tenant does not exist")


def test_create_twice_is_409(admin: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "test")
    assert create_tenant(admin, "acme", ["test"]).status_code == 204
    assert_reason(create_tenant(admin, "acme", ["test"], ["x"]), 409, "Tenant already exist")
    assert clean_store.get_json("/admin/policies/acme")["adminRoles"] == []


@pytest.mark.parametrize(
    ("name", "clusters", "roles", "reason"),
    [
        ("sp ace", ["test"], [], "Tenant name is not valid"),
        ("b@d", ["test"], [], "Tenant name is not valid"),
        ("acme", [], [], "Clusters cannot be empty or blank"),
        ("acme", ["test", " "], [], "Clusters cannot be empty or blank"),
        ("acme", ["test", "nowhere"], [], "Clusters do not exist"),
        ("acme", ["test"], [" ops"], "AdminRoles contains whitespace in the beginning or end."),
        ("acme", ["test"], ["ops "], "AdminRoles contains whitespace in the beginning or end."),
    ],
)
def test_create_validation_is_412_and_writes_nothing(
    admin: httpx.Client,
    clean_store: RawEtcd,
    name: str,
    clusters: list[str],
    roles: list[str],
    reason: str,
) -> None:
    add_cluster(clean_store, "test")
    response = admin.put(
        f"{TENANTS}/{name}", json={"adminRoles": roles, "allowedClusters": clusters}
    )
    assert_reason(response, 412, reason)
    assert clean_store.keys("/admin/policies") == []


def test_name_with_allowed_punctuation_is_accepted(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    add_cluster(clean_store, "test")
    assert create_tenant(admin, "a-b=c:d.e_f9", ["test"]).status_code == 204
    assert admin.get(TENANTS).json() == ["a-b=c:d.e_f9"]


def test_create_without_body_is_412(admin: httpx.Client, clean_store: RawEtcd) -> None:
    assert_reason(admin.put(f"{TENANTS}/acme"), 412, "TenantInfo is null")
    assert clean_store.keys("/admin/policies") == []


def test_create_with_wrong_types_is_400(admin: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "test")
    response = admin.put(f"{TENANTS}/acme", json={"allowedClusters": "test"})
    assert response.status_code == 400
    assert "allowedClusters" in response.json()["reason"]
    assert clean_store.keys("/admin/policies") == []


def test_max_tenants(permissive: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "test")
    assert create_tenant(permissive, "t1", ["test"]).status_code == 204
    assert create_tenant(permissive, "t2", ["test"]).status_code == 204
    assert_reason(
        create_tenant(permissive, "t3", ["test"]), 412, "Exceed the maximum number of tenants"
    )
    assert clean_store.get("/admin/policies/t3") is None
    # An existing tenant is still a conflict, not a limit.
    assert_reason(create_tenant(permissive, "t1", ["test"]), 409, "Tenant already exist")


def test_update_replaces_the_tenant_info(admin: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "test")
    add_cluster(clean_store, "east")
    create_tenant(admin, "acme", ["test"], ["ops"])
    response = admin.post(
        f"{TENANTS}/acme", json={"adminRoles": ["dev"], "allowedClusters": ["east", "test"]}
    )
    assert response.status_code == 204
    assert clean_store.get_json("/admin/policies/acme") == {
        "adminRoles": ["dev"],
        "allowedClusters": ["east", "test"],
    }


def test_update_unknown_tenant_is_404(admin: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "test")
    response = admin.post(f"{TENANTS}/ghost", json={"allowedClusters": ["test"]})
    assert_reason(response, 404, "Tenant ghost not found")
    assert clean_store.get("/admin/policies/ghost") is None


def test_update_validates_clusters_and_roles(admin: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "test")
    create_tenant(admin, "acme", ["test"])
    before = clean_store.get("/admin/policies/acme")
    cases = [
        ({"allowedClusters": []}, "Clusters cannot be empty or blank"),
        ({}, "Clusters cannot be null"),
        ({"allowedClusters": None, "adminRoles": ["r"]}, "Clusters cannot be null"),
        ({"allowedClusters": ["nowhere"]}, "Clusters do not exist"),
        (
            {"allowedClusters": ["test"], "adminRoles": ["\tx"]},
            "AdminRoles contains whitespace in the beginning or end.",
        ),
    ]
    for body, reason in cases:
        assert_reason(admin.post(f"{TENANTS}/acme", json=body), 412, reason)
    assert clean_store.get("/admin/policies/acme") == before


def test_update_cannot_drop_a_cluster_a_v1_namespace_lives_under(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    """As the 4.0.8 broker's `canUpdateCluster`: a v1 namespace (`tenant/cluster/ns`) holds
    its cluster in the tenant's list; a v2 namespace replicating to it does not."""
    add_cluster(clean_store, "test")
    add_cluster(clean_store, "east")
    create_tenant(admin, "acme", ["test", "east"])
    clean_store.put("/admin/policies/acme/east/legacy", b'{"replication_clusters":["east"]}')
    response = admin.post(f"{TENANTS}/acme", json={"allowedClusters": ["test"]})
    assert_reason(response, 412, "Active namespaces")
    # a Java HashSet<String>, written in its iteration order
    assert clean_store.get_json("/admin/policies/acme")["allowedClusters"] == ["east", "test"]
    # Dropping the cluster no v1 namespace lives under is fine, v2 namespaces or not.
    ns = admin.put("/admin/v2/namespaces/acme/ns1", json={"replication_clusters": ["test"]})
    assert ns.status_code == 204
    assert admin.post(f"{TENANTS}/acme", json={"allowedClusters": ["east"]}).status_code == 204
    assert clean_store.get_json("/admin/policies/acme")["allowedClusters"] == ["east"]


def test_delete_empty_tenant(admin: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "test")
    create_tenant(admin, "acme", ["test"])
    response = admin.delete(f"{TENANTS}/acme")
    assert response.status_code == 204
    assert clean_store.get("/admin/policies/acme") is None
    assert admin.get(TENANTS).json() == []


def test_delete_unknown_tenant_is_404(admin: httpx.Client) -> None:
    assert_reason(admin.delete(f"{TENANTS}/ghost"), 404, "Tenant doesn't exist")


def test_delete_tenant_with_namespaces_is_409(admin: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "test")
    create_tenant(admin, "acme", ["test"])
    assert admin.put("/admin/v2/namespaces/acme/ns1").status_code == 204
    assert_reason(admin.delete(f"{TENANTS}/acme"), 409, "The tenant still has active namespaces")
    assert clean_store.get("/admin/policies/acme") is not None
    assert clean_store.get("/admin/policies/acme/ns1") is not None


def test_forced_delete_not_allowed_by_default(admin: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "test")
    create_tenant(admin, "acme", ["test"])
    response = admin.delete(f"{TENANTS}/acme", params={"force": "true"})
    assert_reason(response, 405, "Broker doesn't allow forced deletion of tenants")
    assert clean_store.get("/admin/policies/acme") is not None


def test_forced_delete_removes_namespaces_and_local_policies(
    permissive: httpx.Client, clean_store: RawEtcd
) -> None:
    add_cluster(clean_store, "test")
    create_tenant(permissive, "acme", ["test"])
    for ns in ("ns1", "ns2"):
        assert permissive.put(f"/admin/v2/namespaces/acme/{ns}").status_code == 204
    group = permissive.post("/admin/v2/namespaces/acme/ns1/antiAffinity", content=b"g")
    assert group.status_code == 204
    response = permissive.delete(f"{TENANTS}/acme", params={"force": "true"})
    assert response.status_code == 204
    assert clean_store.keys("/admin/policies") == []
    assert clean_store.keys("/admin/local-policies") == []
