"""`/admin/v2/namespaces/{tenant}[/{namespace}]`: create, list, get, delete."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from metastore.embedded import EmbeddedEtcd
from tests.factories import NAMESPACES, add_cluster, assert_reason, create_tenant, make_namespace
from tests.support import RawEtcd, ServerProcess

FOUR_BUNDLES = ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"]


@pytest.fixture(scope="module")
def limited_server(
    etcd: EmbeddedEtcd, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A second server on the same etcd: 2 namespaces per tenant, 8 default bundles, forced
    namespace deletes allowed, cluster `east`."""
    conf = {
        "maxNamespacesPerTenant": "2",
        "defaultNumberOfNamespaceBundles": "8",
        "forceDeleteNamespaceAllowed": "true",
    }
    workdir = Path(tmp_path_factory.mktemp("limited"))
    process = ServerProcess(etcd.url, workdir, cluster_name="east", extra_conf=conf)
    process.start()
    yield process
    process.stop()


@pytest.fixture
def limited(limited_server: ServerProcess, clean_store: RawEtcd) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=limited_server.url, timeout=10) as client:
        yield client


def test_create_without_body_uses_pulsar_defaults(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    add_cluster(clean_store, "test")
    create_tenant(admin, "acme", ["test"])
    response = admin.put(f"{NAMESPACES}/acme/ns1")
    assert response.status_code == 204
    assert response.content == b""
    stored = clean_store.get_json("/admin/policies/acme/ns1")
    assert stored["replication_clusters"] == ["test"]
    assert stored["bundles"] == {"boundaries": FOUR_BUNDLES, "numBundles": 4}
    assert "persistence" not in stored
    assert stored["deleted"] is False
    # No local policies at creation (upstream creates them lazily).
    assert clean_store.get("/admin/local-policies/acme/ns1") is None
    # GET shows the broker's isAllowAutoUpdateSchemaEnabled where the stored policies leave the
    # flag unset, as upstream's GET does; nothing is written.
    assert "is_allow_auto_update_schema" not in stored
    assert admin.get(f"{NAMESPACES}/acme/ns1").json() == {**stored,
                                                          "is_allow_auto_update_schema": True}


def test_create_with_policies_body(admin: httpx.Client, clean_store: RawEtcd) -> None:
    for cluster in ("test", "east"):
        add_cluster(clean_store, cluster)
    create_tenant(admin, "acme", ["test", "east"])
    body = {
        "replication_clusters": ["east", "test"],
        "bundles": {"numBundles": 2},
        "persistence": {
            "bookkeeperEnsemble": 3,
            "bookkeeperWriteQuorum": 2,
            "bookkeeperAckQuorum": 2,
            "managedLedgerMaxMarkDeleteRate": 0.0,
        },
        "message_ttl_in_seconds": 60,
    }
    assert admin.put(f"{NAMESPACES}/acme/ns1", json=body).status_code == 204
    stored = clean_store.get_json("/admin/policies/acme/ns1")
    assert stored["replication_clusters"] == ["east", "test"]
    assert stored["bundles"] == {
        "boundaries": ["0x00000000", "0x80000000", "0xffffffff"],
        "numBundles": 2,
    }
    assert stored["persistence"] == body["persistence"]
    assert stored["message_ttl_in_seconds"] == 60  # a field we do not model survives


def test_create_with_empty_object_body(admin: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "test")
    create_tenant(admin, "acme", ["test"])
    assert admin.put(f"{NAMESPACES}/acme/ns1", json={}).status_code == 204
    assert clean_store.get_json("/admin/policies/acme/ns1")["bundles"]["numBundles"] == 4


def test_explicit_boundaries_are_normalised(admin: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "test")
    create_tenant(admin, "acme", ["test"])
    bundles = {"numBundles": 1, "boundaries": ["0xffffffff", "0x0", "0x10", "0x10"]}
    assert admin.put(f"{NAMESPACES}/acme/ns1", json={"bundles": bundles}).status_code == 204
    assert clean_store.get_json("/admin/policies/acme/ns1")["bundles"] == {
        "boundaries": ["0x00000000", "0x00000010", "0xffffffff"],
        "numBundles": 2,
    }
    partial = {"numBundles": 1, "boundaries": ["0x00000000", "0x80000000"]}
    response = admin.put(f"{NAMESPACES}/acme/ns2", json={"bundles": partial})
    assert_reason(
        response,
        400,
        "Input bundles do not cover the whole hash range. first:0x00000000, last:0x80000000",
    )


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (
            {"replication_clusters": ["east"]},
            403,
            "Cluster [east] is not in the list of allowed clusters list for tenant [acme]",
        ),
        ({"message_ttl_in_seconds": -1}, 412, "Invalid value for message TTL"),
        (  # numBundles is a Java int: Jackson refuses the value before Pulsar's own check
            {"bundles": {"numBundles": 4294967297}},
            400,
            "Invalid request: bundles.numBundles: Numeric value (4294967297) out of range of int "
            "(-2147483648 - 2147483647)",
        ),
        (
            {"persistence": {"bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 3}},
            400,
            "Bookkeeper Ensemble (2) >= WriteQuorum (3) >= AckQuorum (2)",
        ),
        (
            {"persistence": {"bookkeeperEnsemble": 6}},
            400,
            "Bookkeeper-Ensemble must be <= 5 and > 0.",
        ),
        (
            {"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 10}},
            400,
            "Invalid retention policy: Setting a single time or size limit to 0 is invalid when "
            "one of the limits has a non-zero value. Use the value of -1 instead of 0 to ignore "
            "a specific limit. To disable retention both limits must be set to 0.",
        ),
    ],
)
def test_create_validation_writes_nothing(
    admin: httpx.Client, clean_store: RawEtcd, body: dict[str, object], status: int, reason: str
) -> None:
    add_cluster(clean_store, "test")
    add_cluster(clean_store, "east")
    create_tenant(admin, "acme", ["test"])
    assert_reason(admin.put(f"{NAMESPACES}/acme/ns1", json=body), status, reason)
    assert clean_store.get("/admin/policies/acme/ns1") is None


def test_create_in_unknown_tenant_is_404(admin: httpx.Client, clean_store: RawEtcd) -> None:
    assert_reason(admin.put(f"{NAMESPACES}/ghost/ns1"), 404, "Tenant does not exist")
    assert clean_store.keys("/admin/policies") == []


def test_create_with_invalid_name_is_412(admin: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "test")
    create_tenant(admin, "acme", ["test"])
    assert_reason(admin.put(f"{NAMESPACES}/acme/b@d"), 412, "Namespace name is not valid")
    assert_reason(admin.get(f"{NAMESPACES}/acme/b@d"), 412, "Namespace name is not valid")
    assert clean_store.keys("/admin/policies/acme/") == []


def test_create_twice_is_409(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    before = clean_store.get("/admin/policies/acme/ns1")
    response = admin.put(f"{NAMESPACES}/acme/ns1", json={"bundles": {"numBundles": 16}})
    assert_reason(response, 409, "Namespace already exists")
    assert clean_store.get("/admin/policies/acme/ns1") == before


def test_bad_body_type_is_400(admin: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "test")
    create_tenant(admin, "acme", ["test"])
    response = admin.put(f"{NAMESPACES}/acme/ns1", json={"replication_clusters": "test"})
    assert response.status_code == 400
    assert "replication_clusters" in response.json()["reason"]
    assert clean_store.get("/admin/policies/acme/ns1") is None


def test_limits_and_defaults_come_from_settings(
    limited: httpx.Client, clean_store: RawEtcd
) -> None:
    add_cluster(clean_store, "east")
    create_tenant(limited, "acme", ["east"])
    for ns in ("a", "b"):
        assert limited.put(f"{NAMESPACES}/acme/{ns}").status_code == 204
    assert_reason(
        limited.put(f"{NAMESPACES}/acme/c"),
        412,
        "Exceed the maximum number of namespace in tenant :acme",
    )
    stored = clean_store.get_json("/admin/policies/acme/a")
    assert stored["replication_clusters"] == ["east"]
    assert stored["bundles"]["numBundles"] == 8
    assert stored["bundles"]["boundaries"][:2] == ["0x00000000", "0x20000000"]
    assert stored["bundles"]["boundaries"][-1] == "0xffffffff"


def test_list_namespaces(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store, "acme/zz")
    make_namespace(admin, clean_store, "acme/aa")
    make_namespace(admin, clean_store, "other/x")
    # A v1 namespace (tenant/cluster/ns) written by an older broker is listed too.
    clean_store.put("/admin/policies/acme/test/legacy", {"replication_clusters": ["test"]})
    response = admin.get(f"{NAMESPACES}/acme")
    assert response.status_code == 200
    assert response.json() == ["acme/aa", "acme/test/legacy", "acme/zz"]


def test_list_of_unknown_tenant_is_404(admin: httpx.Client) -> None:
    assert_reason(admin.get(f"{NAMESPACES}/ghost"), 404, "Tenant not found")
    for invalid in ("\u00e4", "a b", "a*b"):  # Java's ASCII `\w`: checked before existence
        assert_reason(admin.get(f"{NAMESPACES}/{invalid}"), 412, "Tenant name is not valid")


def test_get_unknown_namespace_is_404(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    assert_reason(admin.get(f"{NAMESPACES}/acme/nope"), 404, "Namespace does not exist")


def test_delete_removes_global_and_local_policies(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    make_namespace(admin, clean_store, "acme/ns10")
    assert admin.post(f"{NAMESPACES}/acme/ns1/antiAffinity", content=b"g").status_code == 204
    response = admin.delete(f"{NAMESPACES}/acme/ns1")
    assert response.status_code == 204
    assert clean_store.get("/admin/policies/acme/ns1") is None
    assert clean_store.get("/admin/local-policies/acme/ns1") is None
    assert clean_store.get("/admin/policies/acme/ns10") is not None  # a sibling is untouched
    assert admin.get(f"{NAMESPACES}/acme").json() == ["acme/ns10"]
    assert_reason(admin.delete(f"{NAMESPACES}/acme/ns1"), 404,
                  "Namespace acme/ns1 does not exist.")


def test_delete_namespace_with_topics_is_409(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    clean_store.put("/managed-ledgers/acme/ns1/persistent/t1", b"")
    assert_reason(admin.delete(f"{NAMESPACES}/acme/ns1"), 409, "Cannot delete non empty namespace")
    assert clean_store.get("/admin/policies/acme/ns1") is not None
    forced = admin.delete(f"{NAMESPACES}/acme/ns1", params={"force": "true"})
    assert_reason(forced, 405, "Broker doesn't allow forced deletion of namespaces")


def test_forced_delete_removes_topics(limited: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "east")
    create_tenant(limited, "acme", ["east"])
    assert limited.put(f"{NAMESPACES}/acme/ns1").status_code == 204
    clean_store.put("/managed-ledgers/acme/ns1/persistent/t1", b"")
    clean_store.put("/admin/partitioned-topics/acme/ns1/persistent/p1", {"partitions": 2})
    response = limited.delete(f"{NAMESPACES}/acme/ns1", params={"force": "true"})
    assert response.status_code == 204
    assert clean_store.keys("/managed-ledgers/acme/ns1") == []
    assert clean_store.keys("/admin/partitioned-topics/acme/ns1") == []
    assert clean_store.get("/admin/policies/acme/ns1") is None


def test_a_namespace_holding_only_system_topics_is_deleted_with_them(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    """As the 4.0.8 broker's `internalDeleteNamespaceAsync`: system topics (here a
    partitioned topic-policies `__change_events`) do not make a namespace non-empty; a
    DELETE takes them with it. A user's topic still refuses it."""
    make_namespace(admin, clean_store)
    topics = "/admin/v2/persistent/acme/ns1"
    json_body = {"Content-Type": "application/json"}
    for topic in ("__change_events", "orders"):
        made = admin.put(f"{topics}/{topic}/partitions", content=b"2", headers=json_body)
        assert made.status_code == 204, made.text
    assert_reason(admin.delete(f"{NAMESPACES}/acme/ns1"), 409, "Cannot delete non empty namespace")
    assert admin.delete(f"{topics}/orders/partitions").status_code == 204
    assert admin.delete(f"{NAMESPACES}/acme/ns1").status_code == 204
    for root in ("/admin/policies/acme/ns1", "/admin/local-policies/acme/ns1",
                 "/admin/partitioned-topics/acme/ns1", "/managed-ledgers/acme/ns1"):
        assert clean_store.keys(root) == [], root
