"""Deletes and the writes that depend on what they delete, fired together through a barrier,
many rounds: no orphan key survives, and of two DELETEs of one namespace exactly one wins.

Each pair is excluded by one guarded etcd transaction on the server side; without the guard
these rounds leave orphans (the write checks existence, the DELETE runs, the write lands).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.factories import add_cluster, brokers_seen, create_tenant, register_broker
from tests.support import RawEtcd, ServerProcess

ROUNDS = 5
NS = "/admin/v2/namespaces"
CLUSTER = "test"

Request = Callable[[httpx.Client], httpx.Response]


@pytest.fixture
def clients(server: ServerProcess, clean_store: RawEtcd) -> Iterator[list[httpx.Client]]:
    pair = [httpx.Client(base_url=server.url, timeout=20) for _ in range(2)]
    yield pair
    for client in pair:
        client.close()


def race(clients: list[httpx.Client], first: Request, second: Request) -> list[int]:
    """Both requests released at once; their statuses."""
    barrier = threading.Barrier(2)

    def run(client: httpx.Client, request: Request) -> int:
        barrier.wait(timeout=10)
        return request(client).status_code

    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(run, c, r) for c, r in zip(clients, (first, second), strict=True)]
        return [f.result(timeout=30) for f in futures]


def seed_namespace(admin: httpx.Client, store: RawEtcd, name: str) -> None:
    if store.get(f"/admin/clusters/{CLUSTER}") is None:
        add_cluster(store, CLUSTER)
    if store.get("/admin/policies/acme") is None:
        assert create_tenant(admin, "acme", [CLUSTER]).status_code == 204
    assert admin.put(f"{NS}/acme/{name}").status_code == 204


def delete_namespace(name: str) -> Request:
    return lambda c: c.delete(f"{NS}/acme/{name}")


@pytest.mark.parametrize(
    "write",
    [
        lambda name: lambda c: c.post(
            f"{NS}/acme/{name}/persistence/bookieAffinity",
            json={"bookkeeperAffinityGroupPrimary": "g1"},
        ),
        lambda name: lambda c: c.post(f"{NS}/acme/{name}/antiAffinity", content=b"grp"),
    ],
    ids=["bookie-affinity", "anti-affinity"],
)
def test_namespace_delete_vs_local_policy_write_leaves_no_orphan(
    clients: list[httpx.Client], clean_store: RawEtcd, write: Callable[[str], Request]
) -> None:
    admin = clients[0]
    for n in range(ROUNDS):
        name = f"ns{n}"
        seed_namespace(admin, clean_store, name)
        statuses = race(clients, delete_namespace(name), write(name))
        assert statuses[0] == 204
        assert statuses[1] in (204, 404), statuses
        assert clean_store.get(f"/admin/policies/acme/{name}") is None
        assert clean_store.keys(f"/admin/local-policies/acme/{name}") == [], n


def test_two_deletes_of_one_namespace_exactly_one_wins(
    clients: list[httpx.Client], clean_store: RawEtcd
) -> None:
    admin = clients[0]
    for n in range(ROUNDS):
        name = f"ns{n}"
        seed_namespace(admin, clean_store, name)
        statuses = race(clients, delete_namespace(name), delete_namespace(name))
        assert sorted(statuses) == [204, 404], (n, statuses)


def test_tenant_delete_vs_namespace_create_leaves_no_namespace_behind(
    clients: list[httpx.Client], clean_store: RawEtcd
) -> None:
    admin = clients[0]
    add_cluster(clean_store, CLUSTER)
    for n in range(ROUNDS):
        tenant = f"t{n}"
        assert create_tenant(admin, tenant, [CLUSTER]).status_code == 204
        statuses = race(
            clients,
            lambda c, t=tenant: c.delete(f"/admin/v2/tenants/{t}"),
            lambda c, t=tenant: c.put(f"{NS}/{t}/ns"),
        )
        tenant_left = clean_store.get(f"/admin/policies/{tenant}") is not None
        namespaces = clean_store.keys(f"/admin/policies/{tenant}/")
        assert tenant_left or namespaces == [], (n, statuses, namespaces)
        # One of the two lost: the namespace under a live tenant, or the tenant deleted empty.
        assert statuses in ([204, 404], [409, 204]), (n, statuses)


@pytest.mark.parametrize(
    ("write", "dependent"),
    [
        (
            lambda c: c.post(
                f"/admin/v2/clusters/{CLUSTER}/failureDomains/d1", json={"brokers": ["b:8080"]}
            ),
            f"/admin/clusters/{CLUSTER}/failureDomain/",
        ),
        (
            lambda c: c.post(
                f"/admin/v2/clusters/{CLUSTER}/namespaceIsolationPolicies/p1",
                json={
                    "namespaces": ["acme/.*"], "primary": ["b.*"], "secondary": [],
                    "auto_failover_policy": {
                        "policy_type": "min_available",
                        "parameters": {"min_limit": "1", "usage_threshold": "80"},
                    },
                },
            ),
            f"/admin/clusters/{CLUSTER}/namespaceIsolationPolicies",
        ),
    ],
    ids=["failure-domain", "isolation-policy"],
)
def test_cluster_delete_vs_dependent_write_leaves_no_orphan(
    clients: list[httpx.Client], clean_store: RawEtcd, write: Request, dependent: str
) -> None:
    for n in range(ROUNDS):
        add_cluster(clean_store, CLUSTER)
        statuses = race(clients, lambda c: c.delete(f"/admin/v2/clusters/{CLUSTER}"), write)
        if clean_store.get(f"/admin/clusters/{CLUSTER}") is None:
            assert clean_store.keys(dependent) == [], (n, statuses)
        clean_store.delete(f"/admin/clusters/{CLUSTER}")


def test_namespace_delete_vs_lookup_leaves_no_ownership_record(
    clients: list[httpx.Client], clean_store: RawEtcd
) -> None:
    admin = clients[0]
    register_broker(clean_store, "b1:8080")
    brokers_seen(admin, 1)
    for n in range(ROUNDS):
        name = f"ns{n}"
        seed_namespace(admin, clean_store, name)
        statuses = race(
            clients,
            delete_namespace(name),
            lambda c, ns=name: c.get(f"/lookup/v2/topic/persistent/acme/{ns}/t1"),
        )
        assert statuses[0] == 204
        assert statuses[1] in (200, 404), statuses
        assert clean_store.keys(f"/namespace/acme/{name}/") == [], (n, statuses)


ONLY_TEST = {"allowedClusters": [CLUSTER]}


def test_tenant_update_dropping_a_cluster_vs_namespace_create_using_it(
    clients: list[httpx.Client], clean_store: RawEtcd
) -> None:
    admin = clients[0]
    add_cluster(clean_store, CLUSTER)
    add_cluster(clean_store, "east")
    for n in range(ROUNDS):
        tenant = f"t{n}"
        assert create_tenant(admin, tenant, [CLUSTER, "east"]).status_code == 204
        statuses = race(
            clients,
            lambda c, t=tenant: c.post(f"/admin/v2/tenants/{t}", json=ONLY_TEST),
            lambda c, t=tenant: c.put(f"{NS}/{t}/ns", json={"replication_clusters": ["east"]}),
        )
        # The update always lands (a v2 namespace does not hold a cluster, as upstream); a
        # namespace using the cluster is created only while the tenant still allowed it.
        assert statuses[0] == 204, statuses
        assert clean_store.get_json(f"/admin/policies/{tenant}")["allowedClusters"] == [CLUSTER]
        held = clean_store.range_at(f"/admin/policies/{tenant}", f"/admin/policies/{tenant}0",
                                    clean_store.revision())
        if statuses[1] == 204:
            assert held[f"/admin/policies/{tenant}/ns"][1] < held[f"/admin/policies/{tenant}"][1], (
                n, statuses)
        else:
            assert statuses[1] == 412 and f"/admin/policies/{tenant}/ns" not in held, (n, statuses)

