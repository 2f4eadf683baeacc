"""Topic lookup and namespace unload, as upstream: ownership at `/namespace/{t}/{ns}/{range}`,
brokers chosen among `/loadbalance/brokers/{host:port}` registrations (LocalBrokerData)."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from metastore.embedded import EmbeddedEtcd
from tests.factories import CLUSTER, NAMESPACES, brokers_seen, make_namespace, register_broker
from tests.support import RawEtcd, ServerProcess, wait_until

LOOKUP = "/lookup/v2/topic/persistent"


def lookup(client: httpx.Client, namespace: str, topic: str = "t1") -> httpx.Response:
    return client.get(f"{LOOKUP}/{namespace}/{topic}")


def owner(client: httpx.Client, namespace: str, topic: str = "t1") -> str:
    response = lookup(client, namespace, topic)
    assert response.status_code == 200, response.text
    url: str = response.json()["httpUrl"]
    return url.removeprefix("http://")


def set_anti_affinity(admin: httpx.Client, namespace: str, group: str) -> None:
    response = admin.post(f"{NAMESPACES}/{namespace}/antiAffinity", content=group)
    assert response.status_code == 204


def one_bundle_namespace(admin: httpx.Client, name: str) -> None:
    body = {"bundles": {"numBundles": 1}}
    assert admin.put(f"{NAMESPACES}/{name}", json=body).status_code == 204


def test_lookup_answers_lookup_data_and_records_ownership(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    register_broker(clean_store, "b1:8080")
    brokers_seen(admin, 1)
    response = lookup(admin, "acme/ns1", "my-topic")
    assert response.status_code == 200
    assert response.json() == {
        "brokerUrl": "pulsar://b1:6650",
        "httpUrl": "http://b1:8080",
        "nativeUrl": "pulsar://b1:6650",
        "brokerUrlSsl": "",
    }
    # Four default bundles; crc32 of the full topic name picks the range.
    hash_code = zlib.crc32(b"persistent://acme/ns1/my-topic")
    lower = hash_code & 0xC0000000
    upper = 0xFFFFFFFF if lower == 0xC0000000 else lower + 0x40000000
    key = f"/namespace/acme/ns1/0x{lower:08x}_0x{upper:08x}"
    assert clean_store.keys("/namespace/") == [key]
    assert clean_store.get(key) == (
        b'{"nativeUrl":"pulsar://b1:6650","httpUrl":"http://b1:8080","disabled":false,'
        b'"advertisedListeners":{}}'
    )


def test_topic_hash_matches_pulsars_bundle_ranges(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    # crc32("persistent://acme/ns1/a") = 0x60f22d2f -> second of four bundles.
    assert zlib.crc32(b"persistent://acme/ns1/a") == 0x60F22D2F
    make_namespace(admin, clean_store)
    register_broker(clean_store, "b1:8080")
    brokers_seen(admin, 1)
    owner(admin, "acme/ns1", "a")
    assert clean_store.keys("/namespace/") == ["/namespace/acme/ns1/0x40000000_0x80000000"]


def test_owner_is_stable_and_least_loaded_broker_wins(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    register_broker(clean_store, "b1:8080", cpu=80)
    register_broker(clean_store, "b2:8080", cpu=10)
    register_broker(clean_store, "b3:8080", memory={"usage": 50, "limit": 100})
    brokers_seen(admin, 3)
    assert owner(admin, "acme/ns1") == "b2:8080"
    register_broker(clean_store, "b2:8080", cpu=99)  # load changes do not move an owned bundle
    assert {owner(admin, "acme/ns1") for _ in range(5)} == {"b2:8080"}


def test_missing_registration_fields_are_tolerated(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    clean_store.put("/loadbalance/brokers/b9:8080", b"")
    brokers_seen(admin, 1)
    assert lookup(admin, "acme/ns1").json() == {"httpUrl": "http://b9:8080", "brokerUrlSsl": ""}


def test_isolation_policy_picks_primary_brokers(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    for b in ("b1:8080", "b2:8080", "b3:8080"):
        register_broker(clean_store, b)
    clean_store.put(f"/admin/clusters/{CLUSTER}/namespaceIsolationPolicies", {"p1": {
        "namespaces": ["acme/ns1"], "primary": ["b3"], "secondary": [],
        "auto_failover_policy": {"policy_type": "min_available",
                                 "parameters": {"min_limit": "1", "usage_threshold": "80"}}}})
    brokers_seen(admin, 3)
    assert {owner(admin, "acme/ns1", f"t{i}") for i in range(8)} == {"b3:8080"}


def test_departed_owner_is_replaced(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    register_broker(clean_store, "b1:8080")
    brokers_seen(admin, 1)
    assert owner(admin, "acme/ns1") == "b1:8080"
    register_broker(clean_store, "b2:8080")
    clean_store.delete("/loadbalance/brokers/b1:8080")
    wait_until(lambda: admin.get(f"/admin/v2/brokers/{CLUSTER}").json() == ["b2:8080"])
    assert wait_until(lambda: owner(admin, "acme/ns1") == "b2:8080")


def test_no_broker_is_503_and_unknown_namespace_404(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    response = lookup(admin, "acme/ns1", "x")
    assert (response.status_code, response.json()) == (
        503, {"reason": "No broker was available to own persistent://acme/ns1/x"})
    response = lookup(admin, "acme/nope", "x")  # the broker's ownership check's words
    assert (response.status_code, response.json()) == (404, {"reason": "Namespace not found"})
    assert clean_store.keys("/namespace/") == []


def test_unload_releases_ownership(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    register_broker(clean_store, "b1:8080")
    brokers_seen(admin, 1)
    for i in range(20):
        owner(admin, "acme/ns1", f"t{i}")
    assert len(clean_store.keys("/namespace/acme/ns1/")) == 4
    register_broker(clean_store, "a0:8080")  # now the preferred broker (same load, lower id)
    brokers_seen(admin, 2)
    assert owner(admin, "acme/ns1", "t0") == "b1:8080"
    assert admin.put(f"{NAMESPACES}/acme/ns1/unload").status_code == 204
    assert clean_store.keys("/namespace/") == []
    assert owner(admin, "acme/ns1", "t0") == "a0:8080"
    response = admin.put(f"{NAMESPACES}/acme/nope/unload")
    assert (response.status_code, response.json()) == (404, {"reason": "Namespace not found"})


# -- failure domains and anti-affinity (a server with failureDomainsEnabled=true) ------------


@pytest.fixture(scope="module")
def domains_server(
    etcd: EmbeddedEtcd, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    process = ServerProcess(etcd.url, Path(tmp_path_factory.mktemp("domains")),
                            cluster_name=CLUSTER, extra_conf={"failureDomainsEnabled": "true"})
    process.start()
    yield process
    process.stop()


@pytest.fixture
def domains(domains_server: ServerProcess, clean_store: RawEtcd) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=domains_server.url, timeout=10) as client:
        yield client


def two_domains(admin: httpx.Client, store: RawEtcd) -> None:
    make_namespace(admin, store, "acme/seed")
    for b in ("b1:8080", "b2:8080", "b3:8080", "b4:8080"):
        register_broker(store, b)
    for name, members in (("d1", ["b1:8080", "b2:8080"]), ("d2", ["b3:8080", "b4:8080"])):
        response = admin.post(f"/admin/v2/clusters/{CLUSTER}/failureDomains/{name}",
                              json={"brokers": members})  # fmt: skip
        assert response.status_code == 204, response.text


def test_anti_affinity_spreads_namespaces_over_domains_then_brokers(
    admin: httpx.Client, domains: httpx.Client, clean_store: RawEtcd
) -> None:
    two_domains(admin, clean_store)
    names = [f"acme/aa{i}" for i in range(4)]
    for name in names:
        one_bundle_namespace(admin, name)
        set_anti_affinity(admin, name, "group-a")
    brokers_seen(domains, 4)
    domain_of = {"b1:8080": "d1", "b2:8080": "d1", "b3:8080": "d2", "b4:8080": "d2"}
    owners = [owner(domains, name) for name in names]
    assert sorted(owners) == ["b1:8080", "b2:8080", "b3:8080", "b4:8080"]
    assert domain_of[owners[0]] != domain_of[owners[1]]  # the second goes to the other domain


def test_concurrent_first_lookups_agree_on_one_owner(
    admin: httpx.Client, domains: httpx.Client, clean_store: RawEtcd
) -> None:
    """Two servers that would choose differently (one counts failure domains, one does not)
    race to assign one bundle; every answer names the same broker."""
    two_domains(admin, clean_store)
    for name in ("acme/first", "acme/raced"):
        one_bundle_namespace(admin, name)
        set_anti_affinity(admin, name, "g")
    brokers_seen(admin, 4)
    brokers_seen(domains, 4)
    assert owner(admin, "acme/first") == "b1:8080"
    # Alone, the domain-aware server would pick b3 (other domain), the other server b2.
    clients = [admin, domains] * 8
    barrier = threading.Barrier(len(clients))
    answers: list[str] = []

    def race(client: httpx.Client, index: int) -> None:
        barrier.wait()
        answers.append(owner(client, "acme/raced", f"topic-{index}"))

    threads = [threading.Thread(target=race, args=(c, i)) for i, c in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == len(clients)
    assert len(set(answers)) == 1
    assert answers[0] in ("b2:8080", "b3:8080")
    assert len(clean_store.keys("/namespace/acme/raced/")) == 1
