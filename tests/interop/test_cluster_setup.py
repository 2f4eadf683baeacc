"""A store formatted by upstream's `pulsar initialize-cluster-metadata` (pulsar-broker 4.0.8),
on etcd and on ZooKeeper, taken as it is: our service (`initializeClusterMetadata=false`) serves
what upstream wrote, our bookies stamp their cookies with upstream's instance id, a topic's
ledgers follow a bookie-affinity group set with our `pulsar-admin`, and upstream's BookKeeper
client reads them back."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from javaformats import Cookie
from metastore import paths
from metastore.embedded import EmbeddedEtcd
from metastore.ledger_metadata import decode_ledger_metadata
from tests.cli.conftest import clean_env, run_cli
from tests.interop.upstream import UpstreamJvm, bookkeeper_service_uri, initialize_cluster_metadata
from tests.storage.bookie.support import BookieProcess
from tests.storage.testbed import TOPIC_CONF
from tests.support import RawEtcd, RawStore, ServerProcess
from tests.zookeeper import EmbeddedZooKeeper, RawZooKeeper

PULSAR_CLIENT = str(Path(sys.executable).parent / "pulsar-client")
CHROOT = "/upstream-setup"


@dataclass
class Formatted:
    url: str
    raw: RawStore
    service: ServerProcess
    bookies: list[BookieProcess]


@pytest.fixture(scope="module", params=["etcd", "zookeeper"])
def formatted(request: pytest.FixtureRequest, upstream_broker_classpath: str,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Formatted]:
    """An empty store formatted by upstream, then two of our bookies and our service."""
    work = tmp_path_factory.mktemp("upstream-setup")
    etcd: EmbeddedEtcd | None = None
    raw: RawStore
    if request.param == "zookeeper":
        zookeeper: EmbeddedZooKeeper = request.getfixturevalue("zookeeper")
        raw = RawZooKeeper(zookeeper.hosts(), CHROOT)
        raw.wipe()
        url = f"zk:{zookeeper.hosts()}{CHROOT}"
    else:
        etcd = EmbeddedEtcd(work / "etcd")
        etcd.start()
        raw = RawEtcd(etcd.endpoint)
        url = etcd.url
    bookies: list[BookieProcess] = []
    service = None
    try:
        setup = initialize_cluster_metadata(upstream_broker_classpath, work / "setup", url)
        assert setup.code == 0, setup
        for i in range(2):
            bookie = BookieProcess(raw, url, work / f"bookie{i}")  # type: ignore[arg-type]
            bookie.start()
            bookies.append(bookie)
        service = ServerProcess(url, work / "service", extra_conf={
            **TOPIC_CONF, "initializeClusterMetadata": "false"}).start()
        yield Formatted(url, raw, service, bookies)
    finally:
        for bookie in bookies:
            bookie.kill()
        if service is not None:
            service.stop()
        if isinstance(raw, RawZooKeeper):
            raw.close()
        if etcd is not None:
            etcd.stop()


def test_our_service_serves_what_upstream_wrote(formatted: Formatted) -> None:
    with httpx.Client(base_url=formatted.service.url, timeout=10) as http:
        assert http.get("/admin/v2/clusters").json() == ["test"]
        stored = formatted.raw.get("/admin/clusters/test")
        assert stored is not None
        assert http.get("/admin/v2/clusters/test").content == stored
        assert http.get("/admin/v2/tenants").json() == ["public", "pulsar"]
        assert http.get("/admin/v2/namespaces/public").json() == ["public/default"]
        assert http.get("/admin/v2/namespaces/pulsar").json() == ["pulsar/system"]
        policies = http.get("/admin/v2/namespaces/public/default")
        assert policies.status_code == 200, policies.text
        assert policies.json()["replication_clusters"] == ["test"]
        assert http.get("/admin/v2/tenants/public").json() == {
            "adminRoles": [], "allowedClusters": ["test"]}


def test_our_bookies_take_upstreams_instance_id(formatted: Formatted) -> None:
    instance = formatted.raw.get(paths.LEDGERS_INSTANCE_ID)
    assert instance  # upstream's, not ours: the service did not format the store
    for bookie in formatted.bookies:
        stored = formatted.raw.get(paths.bookie_cookie(bookie.bookie_id))
        assert stored is not None
        assert Cookie.parse(stored.decode()).instance_id == instance.decode()


def test_ledgers_follow_our_affinity_and_upstream_reads_them(
    formatted: Formatted, upstream_bookkeeper: UpstreamJvm
) -> None:
    ids = [b.bookie_id for b in formatted.bookies]
    formatted.raw.put("/bookies", json.dumps({
        "iso": {ids[0]: {"rack": "/r0", "hostname": "127.0.0.1"}},
        "other": {ids[1]: {"rack": "/r1", "hostname": "127.0.0.1"}}}))
    admin = ("--admin-url", formatted.service.url)
    for step in (("namespaces", "set-persistence", "public/default", "-e", "1", "-w", "1",
                  "-a", "1", "-r", "0"),
                 ("namespaces", "set-bookie-affinity-group", "public/default",
                  "--primary-group", "iso", "--strict", "true")):
        done = run_cli(*admin, *step)
        assert done.code == 0, (step, done)
    topic = "persistent://public/default/formatted"
    produced = subprocess.run([PULSAR_CLIENT, "--url", formatted.service.url, "produce", topic,
                               "-m", "upstream-formatted", "-n", "12"], capture_output=True,
                              text=True, env=clean_env(), timeout=120)
    assert produced.returncode == 0, produced.stderr
    stats = run_cli(*admin, "topics", "stats-internal", topic)
    assert stats.code == 0, stats.err
    ledger = json.loads(stats.out)["ledgers"][0]["ledgerId"]
    raw = formatted.raw.get(paths.ledger(ledger))
    assert raw is not None
    assert decode_ledger_metadata(ledger, raw).current_ensemble == (ids[0],)
    # the first ledger, closed at 10 entries (TOPIC_CONF's rollover), each a Pulsar message
    read = upstream_bookkeeper.run("bk-client", "read", bookkeeper_service_uri(formatted.url),
                                   "v3", str(ledger))
    assert read.code == 0, read
    assert read.out.splitlines()[:2] == ["lac 9", "closed true"], read.out
    assert read.out.count("upstream-formatted") == 10, read.out
