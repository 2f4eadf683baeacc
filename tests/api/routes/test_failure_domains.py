"""`/admin/v2/clusters/{c}/failureDomains`: codes and reasons as upstream, one broker in at most
one domain even under concurrent writers, JSON as stored at Pulsar's key."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.support import RawEtcd, ServerProcess

DOMAINS = "/admin/v2/clusters/us-west/failureDomains"


@pytest.fixture
def cluster(admin: httpx.Client) -> str:
    assert admin.put("/admin/v2/clusters/us-west", json={}).status_code == 200
    return "us-west"


def test_set_domain_is_204_and_stored_at_pulsars_key(
    admin: httpx.Client, clean_store: RawEtcd, cluster: str
) -> None:
    response = admin.post(f"{DOMAINS}/domain-a", json={"brokers": ["b1:8080", "b2:8080"]})
    assert response.status_code == 204
    assert response.content == b""
    assert clean_store.get("/admin/clusters/us-west/failureDomain/domain-a") == (
        b'{"brokers":["b1:8080","b2:8080"]}'
    )
    assert admin.get(f"{DOMAINS}/domain-a").json() == {"brokers": ["b1:8080", "b2:8080"]}


def test_domain_without_brokers_is_an_empty_object(
    admin: httpx.Client, clean_store: RawEtcd, cluster: str
) -> None:
    assert admin.post(f"{DOMAINS}/empty", json={}).status_code == 204
    assert clean_store.get("/admin/clusters/us-west/failureDomain/empty") == b"{}"
    assert admin.get(f"{DOMAINS}/empty").json() == {}
    assert admin.get(DOMAINS).json() == {"empty": {}}


def test_brokers_are_a_set(admin: httpx.Client, clean_store: RawEtcd, cluster: str) -> None:
    assert admin.post(f"{DOMAINS}/d", json={"brokers": ["b1:8080", "b1:8080"]}).status_code == 204
    assert clean_store.get_json("/admin/clusters/us-west/failureDomain/d") == {
        "brokers": ["b1:8080"]
    }


def test_post_is_an_upsert(admin: httpx.Client, cluster: str) -> None:
    admin.post(f"{DOMAINS}/domain-a", json={"brokers": ["b1:8080", "b2:8080"]})
    assert admin.post(f"{DOMAINS}/domain-a", json={"brokers": ["b2:8080"]}).status_code == 204
    assert admin.get(f"{DOMAINS}/domain-a").json() == {"brokers": ["b2:8080"]}


def test_broker_in_another_domain_is_409_with_java_list(
    admin: httpx.Client, clean_store: RawEtcd, cluster: str
) -> None:
    admin.post(f"{DOMAINS}/domain-a", json={"brokers": ["b1:8080", "b2:8080", "b3:8080"]})
    response = admin.post(
        f"{DOMAINS}/domain-b", json={"brokers": ["b3:8080", "b9:8080", "b2:8080"]}
    )
    assert response.status_code == 409
    assert response.json() == {"reason": "[b2:8080, b3:8080] already exists in domain-a"}
    assert clean_store.get("/admin/clusters/us-west/failureDomain/domain-b") is None


def test_same_broker_in_domains_of_different_clusters_is_fine(
    admin: httpx.Client, cluster: str
) -> None:
    assert admin.put("/admin/v2/clusters/us-east", json={}).status_code == 200
    admin.post(f"{DOMAINS}/domain-a", json={"brokers": ["b1:8080"]})
    response = admin.post(
        "/admin/v2/clusters/us-east/failureDomains/domain-b", json={"brokers": ["b1:8080"]}
    )
    assert response.status_code == 204


def test_list_is_a_map_and_empty_without_cluster_check(admin: httpx.Client, cluster: str) -> None:
    assert admin.get("/admin/v2/clusters/nope/failureDomains").json() == {}
    assert admin.get(DOMAINS).json() == {}
    admin.post(f"{DOMAINS}/domain-b", json={"brokers": ["b2:8080"]})
    admin.post(f"{DOMAINS}/domain-a", json={"brokers": ["b1:8080"]})
    response = admin.get(DOMAINS)
    assert response.status_code == 200
    assert response.json() == {
        "domain-a": {"brokers": ["b1:8080"]},
        "domain-b": {"brokers": ["b2:8080"]},
    }


def test_unknown_cluster_is_412(admin: httpx.Client, clean_store: RawEtcd) -> None:
    base = "/admin/v2/clusters/nope/failureDomains/d"
    for response in (
        admin.post(base, json={"brokers": ["b1:8080"]}),
        admin.get(base),
        admin.delete(base),
    ):
        assert response.status_code == 412
        assert response.json() == {"reason": "Cluster nope does not exist."}
    assert clean_store.keys("/admin/clusters") == []


def test_unknown_domain_get_and_delete_are_404(admin: httpx.Client, cluster: str) -> None:
    response = admin.get(f"{DOMAINS}/nope")
    assert response.status_code == 404
    assert response.json() == {"reason": "Domain nope for cluster us-west does not exist"}
    response = admin.delete(f"{DOMAINS}/nope")
    assert response.status_code == 404
    assert response.json() == {"reason": "Domain-name nope or cluster us-west does not exist"}


def test_delete_is_200_with_empty_body(
    admin: httpx.Client, clean_store: RawEtcd, cluster: str
) -> None:
    admin.post(f"{DOMAINS}/domain-a", json={"brokers": ["b1:8080"]})
    response = admin.delete(f"{DOMAINS}/domain-a")
    assert response.status_code == 200
    assert response.content == b""
    assert clean_store.get("/admin/clusters/us-west/failureDomain/domain-a") is None
    # the broker is free again
    assert admin.post(f"{DOMAINS}/domain-b", json={"brokers": ["b1:8080"]}).status_code == 204


def test_bad_bodies_are_400_and_change_nothing(
    admin: httpx.Client, clean_store: RawEtcd, cluster: str
) -> None:
    headers = {"Content-Type": "application/json"}
    for body in (b"{oops", b'{"brokers": "b1:8080"}', b'{"brokers": [{"a": 1}]}'):
        response = admin.post(f"{DOMAINS}/d", content=body, headers=headers)
        assert response.status_code == 400, body
        assert "reason" in response.json()
    assert clean_store.keys("/admin/clusters/us-west/failureDomain") == []


def race(server: ServerProcess, broker: str, domains: list[str]) -> list[int]:
    """POST `broker` into each of `domains` at once, one thread and connection per domain."""
    barrier = threading.Barrier(len(domains))
    statuses: list[int] = []

    def write(domain: str) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            barrier.wait()
            response = client.post(f"{DOMAINS}/{domain}", json={"brokers": [broker]})
            statuses.append(response.status_code)

    threads = [threading.Thread(target=write, args=(domain,)) for domain in domains]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def test_concurrent_writers_never_put_one_broker_in_two_domains(
    server: ServerProcess, admin: httpx.Client, cluster: str
) -> None:
    writers = 6
    for round_number in range(15):
        broker = f"shared-{round_number}:8080"
        domains = [f"round{round_number}-domain{i}" for i in range(writers)]
        statuses = race(server, broker, domains)

        assert sorted(statuses) == [204] + [409] * (writers - 1), statuses
        holders = [
            name
            for name, domain in admin.get(DOMAINS).json().items()
            if broker in domain.get("brokers", [])
        ]
        assert len(holders) == 1, holders
