"""Fixtures: a real etcd and a real ZooKeeper on free ports and the real server over HTTP,
shared by the session; every test starts from an empty store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from metastore.embedded import EmbeddedEtcd
from metastore.store import MetadataStore
from tests.storage.testbed import TOPIC_CONF, Cluster, start_cluster, stop_cluster
from tests.support import RawEtcd, ServerProcess, TokenServers, token_conf, wait_until
from tests.zookeeper import EmbeddedZooKeeper, RawZooKeeper
from tests.zookeeper import available as zookeeper_available


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedEtcd]:
    server = EmbeddedEtcd(tmp_path_factory.mktemp("etcd"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    """One real ZooKeeper (Debian's package) for the whole session."""
    assert zookeeper_available(), "Debian's zookeeper package is not installed (make system-deps)"
    server = EmbeddedZooKeeper(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def raw_etcd(etcd: EmbeddedEtcd) -> RawEtcd:
    return RawEtcd(etcd.endpoint)


@pytest.fixture
async def store(etcd: EmbeddedEtcd, raw_etcd: RawEtcd) -> AsyncIterator[MetadataStore]:
    """A `MetadataStore` on the session's etcd, wiped first."""
    raw_etcd.wipe()
    store = MetadataStore([etcd.endpoint], timeout=5)
    yield store
    await store.close()


@pytest.fixture(scope="session")
def server(etcd: EmbeddedEtcd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = ServerProcess(etcd.url, tmp_path_factory.mktemp("server")).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def token_server(etcd: EmbeddedEtcd, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[TokenServers]:
    """Servers with token authentication and authorisation on (`tests.support.token_conf`),
    on the session's etcd unless told another; each stopped after the module."""
    started: list[ServerProcess] = []

    def start(super_users: str, *, metadata_store_url: str | None = None,
              **conf: str) -> ServerProcess:
        server = ServerProcess(metadata_store_url or etcd.url,
                               tmp_path_factory.mktemp("token-server"),
                               extra_conf=token_conf(super_users, **conf))
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def store_kind(request: pytest.FixtureRequest) -> str:
    """The store under `admin` and `clean_store`: etcd, unless a module parametrises it
    (`pytestmark = tests.zookeeper.ON_BOTH_STORES`)."""
    return str(getattr(request, "param", "etcd"))


@pytest.fixture(scope="session")
def zookeeper_server(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """The real server on the session's ZooKeeper, every key under `/pulsar-service`."""
    process = ServerProcess(f"zk:{zookeeper.hosts()}/pulsar-service",
                            tmp_path_factory.mktemp("zookeeper-server")).start()
    yield process
    process.stop()


@pytest.fixture
def raw_zookeeper(zookeeper: EmbeddedZooKeeper, zookeeper_server: ServerProcess
                  ) -> Iterator[RawZooKeeper]:
    """Per test, not per session: a connected kazoo client's thread calls the `random`
    module's functions on every turn of its loop (pings included), and one left running
    changes the global random state under the Hypothesis tests of later modules, which
    Hypothesis reports as `random` used inside a strategy."""
    raw = RawZooKeeper(zookeeper.hosts(), "/pulsar-service")
    yield raw
    raw.close()


@pytest.fixture
def store_server(request: pytest.FixtureRequest, store_kind: str) -> ServerProcess:
    """The shared server on the store `store_kind` names."""
    name = "zookeeper_server" if store_kind == "zookeeper" else "server"
    found: ServerProcess = request.getfixturevalue(name)
    return found


@pytest.fixture
def clean_store(request: pytest.FixtureRequest, store_kind: str,
                store_server: ServerProcess) -> RawEtcd:
    """An empty store, with the server's rack cache caught up with the wipe (a
    `RawZooKeeper`, with the same methods, when the module runs on ZooKeeper too)."""
    raw: RawEtcd = request.getfixturevalue(
        "raw_zookeeper" if store_kind == "zookeeper" else "raw_etcd")
    raw.wipe()
    wait_until(lambda: httpx.get(f"{store_server.url}/admin/v2/bookies/racks-info").json() == {})
    return raw


@pytest.fixture
def admin(store_server: ServerProcess, clean_store: RawEtcd) -> Iterator[httpx.Client]:
    """An HTTP client on the shared server, over an empty store."""
    with httpx.Client(base_url=store_server.url, timeout=10) as client:
        yield client


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture(scope="session")
def topic_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Its own etcd and three bookie processes: 0 and 1 in group `iso`, 2 in `other`."""
    running = start_cluster(tmp_path_factory.mktemp("topics"), 3)
    running.set_groups({"iso": running.ids[:2], "other": running.ids[2:]})
    yield running
    stop_cluster(running)


@pytest.fixture(scope="session")
def topic_service(topic_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[ServerProcess]:
    """The service on `topic_cluster` (rollover every 10 entries, 64 KiB maxMessageSize), with
    cluster `test`, tenant `acme`, namespaces `acme/plain` and `acme/strict` (E=Qw=Qa=2,
    strict bookie affinity to group `iso`)."""
    # The fixture creates cluster `test` itself: no first-start metadata racing its PUT.
    conf = {**TOPIC_CONF, "initializeClusterMetadata": "false"}
    server = ServerProcess(topic_cluster.etcd.url, tmp_path_factory.mktemp("service"),
                           extra_conf=conf).start()
    with httpx.Client(base_url=server.url, timeout=10) as http:
        http.put("/admin/v2/clusters/test", json={"serviceUrl": "http://x"}).raise_for_status()
        http.put("/admin/v2/tenants/acme", json={"allowedClusters": ["test"]}).raise_for_status()
        for ns in ("strict", "plain"):
            http.put(f"/admin/v2/namespaces/acme/{ns}").raise_for_status()
        http.post("/admin/v2/namespaces/acme/strict/persistence", json={
            "bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 2,
            "managedLedgerMaxMarkDeleteRate": 0}).raise_for_status()
        http.post("/admin/v2/namespaces/acme/strict/persistence/bookieAffinity", json={
            "bookkeeperAffinityGroupPrimary": "iso",
            "bookkeeperAffinityGroupStrict": True}).raise_for_status()
    yield server
    server.stop()
