"""Bookie affinity group (and its strict extension) in the namespace's local policies."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from metastore.embedded import EmbeddedEtcd
from tests.factories import (
    NAMESPACES,
    add_cluster,
    assert_reason,
    create_tenant,
    local_policies_bytes,
    local_policies_of,
    make_namespace,
)
from tests.support import RawEtcd, ServerProcess

AFFINITY = f"{NAMESPACES}/acme/ns1/persistence/bookieAffinity"
LOCAL = "/admin/local-policies/acme/ns1"
GROUP_URL = f"{NAMESPACES}/acme/ns1/antiAffinity"


@pytest.fixture(scope="module")
def second_server(
    etcd: EmbeddedEtcd, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """Another server process on the same etcd, so writers only share etcd's CAS."""
    process = ServerProcess(etcd.url, Path(tmp_path_factory.mktemp("second"))).start()
    yield process
    process.stop()


def test_get_before_any_local_policies_is_404(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    assert_reason(admin.get(AFFINITY), 404, "Namespace local-policies does not exist")


def test_set_get_delete(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    body = {"bookkeeperAffinityGroupPrimary": "ssd", "bookkeeperAffinityGroupSecondary": "default"}
    response = admin.post(AFFINITY, json=body)
    assert response.status_code == 204
    assert clean_store.get(LOCAL) == local_policies_bytes(clean_store, bookieAffinityGroup=body)
    got = admin.get(AFFINITY)
    assert got.status_code == 200
    assert got.json() == body

    assert admin.delete(AFFINITY).status_code == 204
    assert clean_store.get_json(LOCAL) == local_policies_of(clean_store)
    unset = admin.get(AFFINITY)  # local policies exist, no group
    assert unset.status_code == 204
    assert unset.content == b""


def test_secondary_is_omitted_when_not_given(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    admin.post(AFFINITY, json={"bookkeeperAffinityGroupPrimary": "share"})
    assert clean_store.get_json(LOCAL) == local_policies_of(
        clean_store, bookieAffinityGroup={"bookkeeperAffinityGroupPrimary": "share"}
    )
    assert admin.get(AFFINITY).json() == {"bookkeeperAffinityGroupPrimary": "share"}


def test_strict_is_stored_and_served(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    body = {"bookkeeperAffinityGroupPrimary": "share", "bookkeeperAffinityGroupStrict": True}
    assert admin.post(AFFINITY, json=body).status_code == 204
    assert clean_store.get(LOCAL) == local_policies_bytes(clean_store, bookieAffinityGroup=body)
    assert admin.get(AFFINITY).json() == body


def test_strict_false_is_omitted(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    body = {"bookkeeperAffinityGroupPrimary": "share", "bookkeeperAffinityGroupStrict": False}
    assert admin.post(AFFINITY, json=body).status_code == 204
    stored = clean_store.get_json(LOCAL)
    assert stored == local_policies_of(
        clean_store, bookieAffinityGroup={"bookkeeperAffinityGroupPrimary": "share"}
    )
    assert admin.get(AFFINITY).json() == {"bookkeeperAffinityGroupPrimary": "share"}


def test_unstrict_update_drops_the_flag(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    strict = {"bookkeeperAffinityGroupPrimary": "a", "bookkeeperAffinityGroupStrict": True}
    admin.post(AFFINITY, json=strict)
    admin.post(AFFINITY, json={"bookkeeperAffinityGroupPrimary": "a"})
    assert clean_store.get_json(LOCAL) == local_policies_of(
        clean_store, bookieAffinityGroup={"bookkeeperAffinityGroupPrimary": "a"}
    )


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            {"bookkeeperAffinityGroupStrict": True},
            "bookkeeperAffinityGroupStrict requires bookkeeperAffinityGroupPrimary: "
            "strict affinity needs at least one primary bookie group",
        ),
        (
            {"bookkeeperAffinityGroupPrimary": " , ", "bookkeeperAffinityGroupStrict": True},
            "bookkeeperAffinityGroupStrict requires bookkeeperAffinityGroupPrimary: "
            "strict affinity needs at least one primary bookie group",
        ),
        (
            {"bookkeeperAffinityGroupPrimary": "a,*", "bookkeeperAffinityGroupStrict": True},
            "bookkeeperAffinityGroupStrict cannot be used with the wildcard primary group '*', "
            "which disables bookie isolation",
        ),
    ],
)
def test_strict_without_a_real_primary_is_412(
    admin: httpx.Client, clean_store: RawEtcd, body: dict[str, Any], reason: str
) -> None:
    make_namespace(admin, clean_store)
    assert_reason(admin.post(AFFINITY, json=body), 412, reason)
    assert clean_store.get(LOCAL) is None


@pytest.mark.parametrize(
    "body",
    [
        {"bookkeeperAffinityGroupPrimary": "a", "bookkeeperAffinityGroupStrict": "yes"},
        {"bookkeeperAffinityGroupPrimary": "a", "bookkeeperAffinityGroupStrict": "1"},
        {"bookkeeperAffinityGroupPrimary": "a", "bookkeeperAffinityGroupStrict": 2.5},
        {"bookkeeperAffinityGroupPrimary": "a", "bookkeeperAffinityGroupStrict": ["true"]},
        {"bookkeeperAffinityGroupPrimary": ["a"]},
        {"bookkeeperAffinityGroupPrimary": {"a": 1}},
    ],
)
def test_bad_types_are_400_and_write_nothing(
    admin: httpx.Client, clean_store: RawEtcd, body: dict[str, Any]
) -> None:
    make_namespace(admin, clean_store)
    response = admin.post(AFFINITY, json=body)
    assert response.status_code == 400
    assert response.json()["reason"].startswith("Invalid request: bookkeeperAffinityGroup")
    assert clean_store.get(LOCAL) is None


@pytest.mark.parametrize(
    ("given", "strict"),
    [("true", True), ("True", True), (1, True), (-1, True), (" TRUE ", True), ("false", False),
     (0, False), ("", False)],
)
def test_strict_and_groups_bind_as_jackson_binds_them(
    admin: httpx.Client, clean_store: RawEtcd, given: Any, strict: bool
) -> None:
    """The extension's flag binds as Jackson binds a `Boolean`, the groups as `String`s (a
    number is its text), as the upstream broker binds the rest of the body."""
    make_namespace(admin, clean_store)
    body = {"bookkeeperAffinityGroupPrimary": 7, "bookkeeperAffinityGroupStrict": given}
    assert admin.post(AFFINITY, json=body).status_code == 204
    expected: dict[str, Any] = {"bookkeeperAffinityGroupPrimary": "7"}
    if strict:
        expected["bookkeeperAffinityGroupStrict"] = True
    assert admin.get(AFFINITY).json() == expected


def test_wildcard_primary_without_strict_is_accepted(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    assert admin.post(AFFINITY, json={"bookkeeperAffinityGroupPrimary": "*"}).status_code == 204


def test_unknown_namespace_is_404(admin: httpx.Client, clean_store: RawEtcd) -> None:
    """Upstream's words (its global-ownership check), for an unknown tenant too."""
    make_namespace(admin, clean_store)
    body = {"bookkeeperAffinityGroupPrimary": "a"}
    for owner in ("acme/ghost", "ghost/ns"):
        url = f"{NAMESPACES}/{owner}/persistence/bookieAffinity"
        for response in (admin.get(url), admin.post(url, json=body), admin.delete(url)):
            assert_reason(response, 404, "Namespace not found")
        assert clean_store.get(f"/admin/local-policies/{owner}") is None


def test_namespace_not_replicated_here_is_412(admin: httpx.Client, clean_store: RawEtcd) -> None:
    add_cluster(clean_store, "test")
    add_cluster(clean_store, "east")
    create_tenant(admin, "acme", ["test", "east"])
    admin.put(f"{NAMESPACES}/acme/ns1", json={"replication_clusters": ["east"]})
    reason = (
        "Namespace missing local cluster name in clusters list: "
        "local_cluster=test ns=acme/ns1 clusters=[east]"
    )
    for response in (
        admin.post(AFFINITY, json={"bookkeeperAffinityGroupPrimary": "a"}),
        admin.get(AFFINITY),
        admin.delete(AFFINITY),
    ):
        assert_reason(response, 412, reason)
    assert clean_store.get(LOCAL) is None


def test_delete_when_never_set_writes_the_local_policies(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    """The broker's DELETE creates the local policies it clears the group in (its bundles,
    no group): the next GET reads an unset group (204), not a missing document (404)."""
    make_namespace(admin, clean_store)
    assert admin.delete(AFFINITY).status_code == 204
    assert clean_store.get(LOCAL) == local_policies_bytes(clean_store)
    assert admin.get(AFFINITY).status_code == 204


TOPICS = "/admin/v2/persistent/acme/ns1"
# requests that check a topic's ownership, which loads the namespace's bundles on a broker
LOADING_BUNDLES = [
    ("GET", "/lookup/v2/topic/persistent/acme/ns1/t", None),  # 503: no broker registered
    ("DELETE", f"{TOPICS}/t", None),
    ("GET", f"{TOPICS}/t/stats", None),
    ("GET", f"{TOPICS}/t/internalStats", None),
    ("GET", f"{TOPICS}/t-partition-0/stats", None),
    ("GET", f"{TOPICS}/t/examinemessage", None),
    ("GET", f"{TOPICS}/t/ledger/1/entry/0", None),
    ("DELETE", f"{TOPICS}/t/partitions", None),
]
# requests that do not, or are refused before the check
NOT_LOADING_BUNDLES = [
    ("PUT", f"{TOPICS}/p/partitions", b"2"),
    ("GET", f"{TOPICS}/t/partitions", None),
    ("GET", TOPICS, None),
    ("GET", f"{TOPICS}/partitioned", None),
    ("GET", f"{TOPICS}/t/partitioned-stats", None),
    ("GET", f"{TOPICS}/t/partitioned-internalStats", None),
    ("PUT", f"{TOPICS}/q-partition-3", None),  # 412: no partitioned topic q
    ("PUT", f"{NAMESPACES}/acme/ns1/unload", None),
    ("GET", f"{NAMESPACES}/acme/ns1", None),
    ("GET", AFFINITY, None),
]


@pytest.mark.parametrize(("method", "url", "body"), LOADING_BUNDLES)
def test_a_topics_ownership_check_leaves_the_local_policies_a_broker_leaves(
    admin: httpx.Client, clean_store: RawEtcd, method: str, url: str, body: bytes | None
) -> None:
    """As a broker's first load of a namespace's bundles (`copyToLocalPolicies`, checked
    against the 4.0.8 broker): local policies holding the namespace's bundles, whatever the
    request's answer; the bookie affinity then reads as unset."""
    make_namespace(admin, clean_store)
    assert admin.request(method, url, content=body).status_code in (204, 404, 503)
    assert clean_store.get(LOCAL) == local_policies_bytes(clean_store)
    assert admin.get(AFFINITY).status_code == 204
    admin.request(method, url, content=body)  # once there, left as they are
    assert clean_store.get(LOCAL) == local_policies_bytes(clean_store)


@pytest.mark.parametrize(("method", "url", "body"), NOT_LOADING_BUNDLES)
def test_requests_without_an_ownership_check_leave_no_local_policies(
    admin: httpx.Client, clean_store: RawEtcd, method: str, url: str, body: bytes | None
) -> None:
    make_namespace(admin, clean_store)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    assert admin.request(method, url, content=body, headers=headers).status_code < 500
    assert clean_store.get(LOCAL) is None
    assert_reason(admin.get(AFFINITY), 404, "Namespace local-policies does not exist")


def test_an_ownership_check_on_a_missing_namespace_writes_nothing(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    for method, url, body in LOADING_BUNDLES:
        admin.request(method, url.replace("/ns1/", "/ghost/"), content=body)
    assert clean_store.get("/admin/local-policies/acme/ghost") is None


def test_update_keeps_unknown_and_other_local_fields(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    written_by_pulsar = {
        "bundles": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1},
        "namespaceAntiAffinityGroup": "g",
        "migrated": True,
    }
    clean_store.put(LOCAL, written_by_pulsar)
    assert admin.post(AFFINITY, json={"bookkeeperAffinityGroupPrimary": "ssd"}).status_code == 204
    assert clean_store.get_json(LOCAL) == {
        **written_by_pulsar,
        "bookieAffinityGroup": {"bookkeeperAffinityGroupPrimary": "ssd"},
    }
    assert admin.delete(AFFINITY).status_code == 204
    assert clean_store.get_json(LOCAL) == written_by_pulsar


def test_concurrent_writers_of_one_namespace_lose_no_update(
    admin: httpx.Client, clean_store: RawEtcd, second_server: ServerProcess
) -> None:
    """Anti-affinity and bookie-affinity writers race on one local-policies document, through
    two server processes (so only etcd's compare-and-swap can keep them apart); each round
    both values end up stored, whichever order the writes land in."""
    make_namespace(admin, clean_store)
    url_of = {"anti": second_server.url, "affinity": str(admin.base_url)}
    rounds = 25
    barrier = threading.Barrier(2)
    failures: list[str] = []

    def write(kind: str) -> None:
        with httpx.Client(base_url=url_of[kind], timeout=10) as client:
            for i in range(rounds):
                barrier.wait()
                if kind == "anti":
                    response = client.post(GROUP_URL, content=f"group-{i}".encode())
                else:
                    body = {"bookkeeperAffinityGroupPrimary": f"rack-{i}"}
                    response = client.post(AFFINITY, json=body)
                if response.status_code != 204:
                    failures.append(f"{kind} {i}: {response.status_code} {response.text}")
                barrier.wait()
                if kind == "anti":
                    stored = clean_store.get_json(LOCAL)
                    if stored != local_policies_of(
                        clean_store,
                        namespaceAntiAffinityGroup=f"group-{i}",
                        bookieAffinityGroup={"bookkeeperAffinityGroupPrimary": f"rack-{i}"},
                    ):
                        failures.append(f"round {i}: {stored}")
                barrier.wait()

    threads = [threading.Thread(target=write, args=(kind,)) for kind in ("anti", "affinity")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []
