"""`GET /admin/v2/brokers/{cluster}`: the registered brokers, with Pulsar's cluster-ownership
rule (any name without authorization; redirect or 404 for other clusters with it)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from metastore.embedded import EmbeddedEtcd
from tests.support import RawEtcd, ServerProcess

BROKERS = "/admin/v2/brokers"


def register(store: RawEtcd, *brokers: str) -> None:
    for broker in brokers:
        store.put(f"/loadbalance/brokers/{broker}", b'{"webServiceUrl":"http://x"}')


def test_local_cluster_lists_registered_brokers_in_hash_set_order(
    admin: httpx.Client, clean_store: RawEtcd, server: ServerProcess
) -> None:
    """The load manager collects the registered ids into a `java.util.HashSet`."""
    assert admin.get(f"{BROKERS}/{server.cluster_name}").json() == []
    register(clean_store, "10.0.0.2:8080", "10.0.0.1:8080")
    response = admin.get(f"{BROKERS}/{server.cluster_name}")
    assert response.status_code == 200
    assert response.json() == ["10.0.0.2:8080", "10.0.0.1:8080"]


def test_without_authorization_any_cluster_name_is_valid(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    register(clean_store, "10.0.0.1:8080")
    assert (
        admin.put("/admin/v2/clusters/other", json={"serviceUrl": "http://o:8080"}).status_code
        == 200
    )
    for cluster in ("other", "never-created"):
        response = admin.get(f"{BROKERS}/{cluster}")
        assert response.status_code == 200
        assert response.json() == ["10.0.0.1:8080"]


def test_unregistered_broker_disappears(
    admin: httpx.Client, clean_store: RawEtcd, server: ServerProcess
) -> None:
    register(clean_store, "10.0.0.1:8080", "10.0.0.2:8080")
    clean_store.delete("/loadbalance/brokers/10.0.0.1:8080")
    assert admin.get(f"{BROKERS}/{server.cluster_name}").json() == ["10.0.0.2:8080"]


@pytest.fixture(scope="module")
def authorizing_server(
    etcd: EmbeddedEtcd, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    process = ServerProcess(
        etcd.url,
        tmp_path_factory.mktemp("authorizing"),
        cluster_name="local",
        extra_conf={"authorizationEnabled": "true"},
    ).start()
    yield process
    process.stop()


def test_with_authorization_other_clusters_redirect_or_404(
    authorizing_server: ServerProcess, admin: httpx.Client, clean_store: RawEtcd
) -> None:
    register(clean_store, "10.0.0.1:8080")
    admin.put(
        "/admin/v2/clusters/remote", json={"serviceUrl": "http://remote-1:8081,remote-2:8081"}
    )
    with httpx.Client(base_url=authorizing_server.url, timeout=10) as client:
        assert client.get(f"{BROKERS}/local").json() == ["10.0.0.1:8080"]
        assert client.get(f"{BROKERS}/global").json() == ["10.0.0.1:8080"]

        response = client.get(f"{BROKERS}/remote")
        assert response.status_code == 307
        assert response.headers["location"] == "http://remote-1:8081/admin/v2/brokers/remote"

        response = client.get(f"{BROKERS}/unknown")
        assert response.status_code == 404
        assert response.json() == {"reason": "Cluster does not exist: cluster=unknown"}
