"""An upstream Pulsar broker (pulsar-broker 4.0.8, `PulsarBrokerStarter`) beside our control
plane, on etcd and on ZooKeeper: its metadata on our store, its BookKeeper client on our
bookies (through Pulsar's metadata-store driver on the same store), the namespace's isolation
set through our CLI. Pulsar's Java client produces through the broker; every ensemble of the
broker's ledgers lies in the namespace's strict bookie-affinity group, as our Spark audit of the
live store confirms; moving a bookie out of the group makes the audit flag exactly the broker's
ledgers on it. The admin API answers as the broker's, request for request."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow.dataset as ds
import pytest

from metastore import paths
from metastore.embedded import free_port
from metastore.ledger_metadata import decode_ledger_metadata
from pipeline.snapshot import snapshot
from placement import PlacementConfig
from placement.violations import kind_names
from tests.cli.conftest import run_cli
from tests.interop.answers import in_order, refusal
from tests.interop.upstream import UpstreamBroker, UpstreamJvm
from tests.storage.testbed import (
    TOPIC_CONF,
    Cluster,
    start_cluster_on,
    stop_cluster,
)
from tests.support import ServerProcess, wait_until

NAMESPACE = "mix/isolated"
TOPIC = f"persistent://{NAMESPACE}/orders"
BROKER_CONF = {
    "strictBookieAffinityEnabled": "true",
    "managedLedgerMaxEntriesPerLedger": "10",
    "managedLedgerMinLedgerRolloverTimeMinutes": "0",
    # kept after rollover (no subscription would otherwise let the broker trim them)
    "defaultRetentionTimeInMinutes": "60",
    "defaultRetentionSizeInMB": "100",
}


@dataclass
class Beside:
    cluster: Cluster
    service: ServerProcess
    broker: UpstreamBroker


@pytest.fixture(scope="module", params=["etcd", "zookeeper"])
def beside(request: pytest.FixtureRequest, upstream_broker_classpath: str,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Beside]:
    """Three of our bookies (0 and 1 in group `iso`, 2 in `other`), our service (which creates
    cluster `test` and formats `/ledgers`), the namespace and its strict affinity through our
    CLI, then the upstream broker on the same store: an etcd of its own, or the session's
    ZooKeeper under a chroot."""
    work = tmp_path_factory.mktemp("beside")
    cluster = start_cluster_on(request, work, 3, "/beside")
    service = broker = None
    try:
        cluster.set_groups({"iso": cluster.ids[:2], "other": cluster.ids[2:]})
        service = ServerProcess(cluster.etcd.url, work / "service",
                                extra_conf=dict(TOPIC_CONF)).start()
        admin = ("--admin-url", service.url)
        for step in (("tenants", "create", "mix", "--allowed-clusters", "test"),
                     ("namespaces", "create", NAMESPACE),
                     ("namespaces", "set-bookie-affinity-group", NAMESPACE,
                      "--primary-group", "iso", "--strict", "true")):
            done = run_cli(*admin, *step)
            assert done.code == 0, (step, done)
        broker = UpstreamBroker(upstream_broker_classpath, work / "broker", cluster.etcd.url,
                                free_port(), free_port(), BROKER_CONF)
        running = broker

        def ready() -> bool:
            if running.exited() is not None:
                raise AssertionError(f"broker exited: see {running.workdir}")
            return httpx.get(f"{running.web_url}/admin/v2/clusters", timeout=2).status_code == 200

        wait_until(ready, timeout=180, interval=0.5)
        yield Beside(cluster, service, broker)
    finally:
        if broker is not None:
            broker.stop()
        if service is not None:
            service.stop()
        stop_cluster(cluster)


def ensembles(cluster: Cluster) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for key, value in cluster.raw.snapshot().items():
        ledger_id = paths.ledger_id_of(key)
        if ledger_id is not None:
            md = decode_ledger_metadata(ledger_id, value)
            out[ledger_id] = {b for ensemble in md.ensembles.values() for b in ensemble}
    return out


def audit(spark: Any, cluster: Cluster, out: Path) -> dict[int, list[str]]:
    from pipeline.audit import run_audit

    config = PlacementConfig.from_broker_conf(BROKER_CONF)
    asyncio.run(snapshot(cluster.etcd.url, out / "snap", config))
    run_audit(spark, out / "snap", out / "audit")
    rows = ds.dataset(out / "audit" / "ledger_findings", format="parquet").to_table().to_pylist()
    return {r["ledger_id"]: sorted(kind_names(r["violations"])) for r in rows}


def test_broker_ledgers_follow_our_isolation_and_our_audit_sees_them(
    beside: Beside, upstream_admin: UpstreamJvm, spark: Any, tmp_path: Path
) -> None:
    produced = upstream_admin.run("pulsar-produce", beside.broker.service_url, TOPIC, "25")
    assert produced.code == 0, produced
    # the broker's ledgers: three (rollover every 10 entries), recorded for the topic
    placed = ensembles(beside.cluster)
    assert len(placed) >= 3
    iso, other = beside.cluster.ids[:2], beside.cluster.ids[2]
    assert all(members <= set(iso) for members in placed.values()), placed
    assert audit(spark, beside.cluster, tmp_path / "before") == {}

    moved = iso[0]
    beside.cluster.set_groups({"iso": iso[1:], "other": [other, moved]})
    expected = {ledger: ["FOREIGN_GROUP"] for ledger, members in placed.items()
                if moved in members}
    assert expected
    assert audit(spark, beside.cluster, tmp_path / "after") == expected


# -- the admin API side by side: the same requests to the broker's REST and to ours ------------
#
# Both serve the same store, so each write goes to the broker first and then to ours: the two
# statuses must agree, a refusal must carry the broker's words (Jackson's text for a body it
# cannot bind, the JSON reason otherwise), and after a write both must read the same document.

PROBE = "probe"  # tenant, cluster, domain and policy names of these tests
PROBE_BOOKIE = "10.9.9.9:3181"


@dataclass
class SideBySide:
    theirs: httpx.Client
    ours: httpx.Client
    mismatches: list[str]

    def send(self, method: str, path: str, body: bytes | None = None,
             read: str | None = None) -> None:
        """`method path` with a JSON `body` to both; then `read` (a GET) from both."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        answers = [client.request(method, path, content=body, headers=headers)
                   for client in (self.theirs, self.ours)]
        theirs, ours = answers
        what = f"{method} {path} {body!r}"
        if theirs.status_code != ours.status_code:
            self.mismatches.append(f"{what}: {theirs.status_code} {theirs.text[:200]!r} "
                                   f"against ours {ours.status_code} {ours.text[:200]!r}")
            return
        if theirs.status_code >= 400 and refusal(theirs) not in refusal(ours):
            self.mismatches.append(f"{what}: {refusal(theirs)!r} against ours {refusal(ours)!r}")
        if read is not None:
            self.same_read(read, after=what)

    def create(self, path: str, body: bytes = b"{}") -> None:
        """PUT `path` through the broker (a create answers 409 the second time), then both
        read it alike."""
        created = self.theirs.put(path, content=body,
                                  headers={"Content-Type": "application/json"})
        assert created.status_code in (200, 204), created.text
        self.same_read(path, after=f"PUT {path} {body!r}")

    def same_read(self, path: str, after: str = "") -> None:
        """The same status; a success with the same JSON, keys in the same order."""
        theirs, ours = self.theirs.get(path), self.ours.get(path)
        same = theirs.status_code == ours.status_code and (
            theirs.status_code >= 400 or in_order(theirs) == in_order(ours))
        if not same:
            self.mismatches.append(f"GET {path} {after}: {theirs.status_code} {theirs.text!r} "
                                   f"against ours {ours.status_code} {ours.text!r}")


@pytest.fixture
def side_by_side(beside: Beside) -> Iterator[SideBySide]:
    with httpx.Client(base_url=beside.broker.web_url, timeout=20) as theirs, \
            httpx.Client(base_url=beside.service.url, timeout=20) as ours:
        pair = SideBySide(theirs, ours, [])
        yield pair
        for path in (f"/admin/v2/bookies/racks-info/{PROBE_BOOKIE}",
                     f"/admin/v2/clusters/test/failureDomains/{PROBE}",
                     f"/admin/v2/clusters/test/namespaceIsolationPolicies/{PROBE}",
                     f"/admin/v2/namespaces/{PROBE}/ns", f"/admin/v2/tenants/{PROBE}",
                     f"/admin/v2/clusters/{PROBE}"):
            ours.delete(path)


def test_bodies_bind_as_the_brokers_jackson_binds_them(side_by_side: SideBySide) -> None:
    """Scalars coerced into String, int, double and boolean fields as Jackson coerces them,
    a single value never taken for a set, and each refusal in Jackson's words."""
    pair = side_by_side
    rack = f"/admin/v2/bookies/racks-info/{PROBE_BOOKIE}"
    for body in (b'{"rack":5}', b'{"rack":5.5}', b'{"rack":true}', b'{"rack":"/r","hostname":7}',
                 b'{"rack":null,"hostname":"h"}', b'{"rack":[1]}', b'{"rack":{"a":1}}',
                 b'{"hostname":false}'):
        pair.send("POST", f"{rack}?group={PROBE}", body, read=rack)

    cluster = f"/admin/v2/clusters/{PROBE}"
    pair.create(cluster, b'{"serviceUrl":"http://probe:8080"}')
    for flag in (b'"true"', b"1", b"0", b"-1", b'"TRUE"', b'" True "', b'""', b"null", b'"yes"',
                 b'"1"', b"2.5", b"[true]"):
        pair.send("POST", cluster,
                  b'{"serviceUrl":"http://probe:8080","brokerClientTlsEnabled":%s}' % flag,
                  read=cluster)
    for url in (b"5", b"true", b"[1]"):
        pair.send("POST", cluster, b'{"serviceUrl":%s}' % url, read=cluster)

    tenant = f"/admin/v2/tenants/{PROBE}"
    pair.create(tenant, b'{"allowedClusters":["test"]}')
    for body in (b'{"allowedClusters":["test"],"adminRoles":[1,true]}',
                 b'{"allowedClusters":["test"],"adminRoles":"r"}', b'{"allowedClusters":5}',
                 b'{"allowedClusters":["test"],"adminRoles":[[1]]}', b"{}",
                 b'{"allowedClusters":null}', b'{"allowedClusters":[]}'):
        pair.send("POST", tenant, body, read=tenant)

    pair.create(f"/admin/v2/namespaces/{PROBE}/ns")
    persistence = f"/admin/v2/namespaces/{PROBE}/ns/persistence"
    for count in (b'"3"', b'" 3"', b'"+3"', b"3.999", b'"0x3"', b'"3.5"', b'"3e0"', b"true",
                  b"null", b'""', b"-0.5", b"2147483648", b"10000000000.5", b"[3]"):
        pair.send("POST", persistence, b'{"bookkeeperEnsemble":%s,"bookkeeperWriteQuorum":1,'
                                       b'"bookkeeperAckQuorum":1}' % count, read=persistence)
    for rate in (b'"1.5"', b'" 2.5"', b'"1e3"', b'""', b"null", b"5", b"true", b'"0x10"',
                 b'"1,5"'):
        pair.send("POST", persistence, b'{"bookkeeperEnsemble":1,"bookkeeperWriteQuorum":1,'
                                       b'"bookkeeperAckQuorum":1,'
                                       b'"managedLedgerMaxMarkDeleteRate":%s}' % rate,
                  read=persistence)
    pair.send("POST", persistence, b'{"bookkeeperEnsemble":1,"bookkeeperWriteQuorum":1,'
                                   b'"bookkeeperAckQuorum":1,"managedLedgerStorageClassName":5}',
              read=persistence)

    domain = f"/admin/v2/clusters/test/failureDomains/{PROBE}"
    for body in (b'{"brokers":[5,true]}', b'{"brokers":5}', b'{"brokers":"b:8080"}',
                 b'{"brokers":[{"b":1}]}'):
        pair.send("POST", domain, body, read=domain)

    isolation = f"/admin/v2/clusters/test/namespaceIsolationPolicies/{PROBE}"
    policy = (b'{"namespaces":%s,"primary":["nowhere-.*"],"auto_failover_policy":'
              b'{"policy_type":"min_available","parameters":%s}}')
    for namespaces, parameters in (
            (b'["probe-none/.*"]', b'{"min_limit":1,"usage_threshold":80}'),
            (b'["probe-none/.*"]', b"[1]"), (b'["probe-none/.*"]', b'"x"'),
            (b'["probe-none/.*"]', b"5"), (b'["probe-none/.*"]', b'{"min_limit":[1]}'),
            (b'"probe-none/.*"', b'{"min_limit":"1","usage_threshold":"80"}'),
            (b"[[1]]", b'{"min_limit":"1","usage_threshold":"80"}')):
        pair.send("POST", isolation, policy % (namespaces, parameters), read=isolation)

    # a body that is not an object, for each document: refused, naming the Java class
    for method, path in (("POST", f"{rack}?group={PROBE}"), ("POST", cluster), ("POST", tenant),
                         ("POST", persistence), ("POST", domain), ("POST", isolation),
                         ("POST", f"/admin/v2/namespaces/{PROBE}/ns/persistence/bookieAffinity"),
                         ("PUT", f"/admin/v2/namespaces/{PROBE}/other")):
        for body in (b"[]", b'"x"', b"5", b"-7", b"5.5", b"true", b"[{}]"):
            pair.send(method, path, body)
    assert pair.mismatches == [], "\n".join(pair.mismatches)


def test_paths_and_reads_answer_as_the_broker_answers(side_by_side: SideBySide) -> None:
    """A trailing slash names the same resource; every bookie with a cookie is listed, in
    the broker's order; a namespace's policies show the broker's
    `is_allow_auto_update_schema` where unset; setting replication clusters answers 200 and
    binds the list as Jackson does; bookie affinity, lookup, unload and topic creation in a
    namespace that does not exist are 404 in the broker's words, and so is its delete; a topic
    named as a partition of no partitioned topic is refused; a cluster's peers are refused as
    the broker refuses them."""
    pair = side_by_side
    pair.create(f"/admin/v2/tenants/{PROBE}", b'{"allowedClusters":["test"]}')
    pair.create(f"/admin/v2/namespaces/{PROBE}/ns")
    for path in ("/admin/v2/clusters/", "/admin/v2/clusters/test/", "/admin/v2/tenants/",
                 f"/admin/v2/tenants/{PROBE}/", f"/admin/v2/namespaces/{PROBE}/",
                 f"/admin/v2/namespaces/{PROBE}/ns/", "/admin/v2/namespaces/public/default",
                 "/admin/v2/clusters/test/failureDomains/", "/admin/v2/bookies/racks-info/",
                 "/admin/v2/clusters//test", f"/admin/v2/namespaces/{PROBE}/ns/persistence/",
                 "/admin/v2/bookies/all"):
        pair.same_read(path)
    replication = f"/admin/v2/namespaces/{PROBE}/ns/replication"
    for clusters in (b'["test"]', b'["test","test"]', b'"test"', b"[[1]]", b"[]"):
        pair.send("POST", replication, clusters, read=replication)
    # the checks walk the ids in HashSet order: `test`'s peer conflict before `probe`'s
    # not being allowed for the tenant, whichever order the body gives
    pair.create(f"/admin/v2/clusters/{PROBE}", b'{"serviceUrl":"http://probe:8080"}')
    json_body = {"Content-Type": "application/json"}
    assert pair.theirs.post("/admin/v2/clusters/test/peers", content=f'["{PROBE}"]',
                            headers=json_body).status_code == 204
    try:
        for clusters in (b'["probe","test"]', b'["test","probe"]', b'["nope","probe"]'):
            pair.send("POST", replication, clusters, read=replication)
    finally:
        pair.theirs.post("/admin/v2/clusters/test/peers", content=b"null", headers=json_body)
    for owner in (f"{PROBE}/missing", "missing/ns"):
        affinity = f"/admin/v2/namespaces/{owner}/persistence/bookieAffinity"
        pair.send("GET", affinity)
        pair.send("POST", affinity, b'{"bookkeeperAffinityGroupPrimary":"g"}')
        pair.send("DELETE", affinity)
        pair.send("GET", f"/lookup/v2/topic/persistent/{owner}/t")
        pair.send("PUT", f"/admin/v2/namespaces/{owner}/unload")
        pair.send("PUT", f"/admin/v2/persistent/{owner}/t")
        pair.send("DELETE", f"/admin/v2/persistent/{owner}/t")
        pair.send("GET", f"/admin/v2/persistent/{owner}")
        pair.send("GET", f"/admin/v2/persistent/{owner}/t/internalStats")
        pair.send("GET", f"/admin/v2/persistent/{owner}/t/examinemessage"
                         "?initialPosition=earliest&messagePosition=1")
        pair.send("GET", f"/admin/v2/persistent/{owner}/t/ledger/1/entry/0")
    pair.send("PUT", "/admin/v2/persistent/a b/ns/t")
    for name in ("t-partition-0", "t-partition-7"):
        pair.send("PUT", f"/admin/v2/persistent/{PROBE}/ns/{name}")
    # the rack's own rule before our name rules: an empty group (ours refuses it) with a
    # rack upstream refuses answers upstream's refusal
    pair.send("POST", f"/admin/v2/bookies/racks-info/{PROBE_BOOKIE}?group=", b'{"rack":"/a/b"}')
    pair.send("DELETE", f"/admin/v2/namespaces/{PROBE}/missing")
    pair.send("DELETE", "/admin/v2/namespaces/missing/ns")
    for cluster, peers in (("test", b'["test"]'), ("test", b'["TEST"]'),
                           ("test", b'["nope"]'), ("nope", b'["test"]')):
        pair.send("POST", f"/admin/v2/clusters/{cluster}/peers", peers)
    for cluster in ("test", "nope"):
        pair.send("GET", f"/admin/v2/clusters/{cluster}/peers")
    assert pair.mismatches == [], "\n".join(pair.mismatches)


NAMES = ["zeta", "probe", "a1", "m", "test2", "b"]  # a HashSet's order is neither sorted nor given
# The next test's tenant: the broker keeps its ownership of the missing namespaces the tests
# above look up under `/namespace/probe`, and on ZooKeeper its delete of tenant `probe` then
# fails (`NotEmptyException`).
LIFE = "lifecycle"


def test_writes_of_either_read_alike_through_both(side_by_side: SideBySide) -> None:
    """Clusters, tenants, namespaces, failure domains, isolation policies, racks, topics and
    anti-affinity groups made and deleted by the broker and by ours in turn: after each round
    both list them alike, in the broker's order (a `HashSet`'s, a `HashMap`'s, the stored
    document's or sorted, as each listing has it), and each deletes what the other made."""
    pair = side_by_side
    sides = {"theirs": pair.theirs, "ours": pair.ours}
    isolation = (b'{"namespaces":["probe-none/.*"],"primary":["x.*"],"secondary":[],'
                 b'"auto_failover_policy":{"policy_type":"min_available",'
                 b'"parameters":{"min_limit":"1","usage_threshold":"80"}}}')
    home = f"/admin/v2/namespaces/{LIFE}/{NAMES[0]}"
    listings = ("/admin/v2/clusters", "/admin/v2/tenants", f"/admin/v2/namespaces/{LIFE}",
                "/admin/v2/clusters/test/failureDomains",
                "/admin/v2/clusters/test/namespaceIsolationPolicies",
                "/admin/v2/bookies/racks-info", f"/admin/v2/persistent/{LIFE}/{NAMES[0]}")

    def made(k: int, name: str) -> list[tuple[str, str, bytes | None]]:
        return [("PUT", f"/admin/v2/clusters/{PROBE}{name}", b'{"serviceUrl":"http://p:8080"}'),
                ("POST", f"/admin/v2/clusters/{PROBE}{name}/peers", b'["test"]'),
                ("PUT", f"/admin/v2/tenants/{PROBE}{name}", b'{"allowedClusters":["test"]}'),
                ("PUT", f"/admin/v2/namespaces/{LIFE}/{name}", None),
                ("POST", f"/admin/v2/namespaces/{LIFE}/{name}/persistence/bookieAffinity",
                 b'{"bookkeeperAffinityGroupPrimary":"iso"}'),
                # one bookie each: the first test leaves one in `iso`
                ("POST", f"/admin/v2/namespaces/{LIFE}/{name}/persistence",
                 b'{"bookkeeperEnsemble":1,"bookkeeperWriteQuorum":1,"bookkeeperAckQuorum":1,'
                 b'"managedLedgerMaxMarkDeleteRate":0}'),
                ("POST", f"/admin/v2/clusters/test/failureDomains/{name}",
                 b'{"brokers":["b%d:8080"]}' % k),
                ("POST", f"/admin/v2/clusters/test/namespaceIsolationPolicies/{name}", isolation),
                ("POST", f"/admin/v2/bookies/racks-info/10.9.9.{k}:3181?group={name}",
                 b'{"rack":"/r1"}'),
                ("PUT", f"/admin/v2/persistent/{LIFE}/{NAMES[0]}/{name}", None),
                ("POST", f"{home}/antiAffinity", name.encode())]

    def removed(k: int, name: str) -> list[str]:
        return [f"/admin/v2/persistent/{LIFE}/{NAMES[0]}/{name}",
                *([] if name == NAMES[0] else [f"/admin/v2/namespaces/{LIFE}/{name}"]),
                f"/admin/v2/clusters/{PROBE}{name}", f"/admin/v2/tenants/{PROBE}{name}",
                f"/admin/v2/clusters/test/failureDomains/{name}",
                f"/admin/v2/clusters/test/namespaceIsolationPolicies/{name}",
                f"/admin/v2/bookies/racks-info/10.9.9.{k}:3181"]

    def by(side: str, method: str, path: str, body: bytes | None = None) -> None:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        done = sides[side].request(method, path, content=body, headers=headers)
        if done.status_code not in (200, 204):
            pair.mismatches.append(f"{side}: {method} {path} {body!r}: {done.status_code} "
                                   f"{done.text[:300]!r}")

    for first, second in (("theirs", "ours"), ("ours", "theirs")):
        by(first, "PUT", f"/admin/v2/tenants/{LIFE}", b'{"allowedClusters":["test"]}')
        for k, name in enumerate(NAMES):
            for method, path, body in made(k, name):
                by(first if k % 2 else second, method, path, body)
        for path in (*listings, home, f"/admin/v2/namespaces/test/antiAffinity/{NAMES[-1]}",
                     *(f"/admin/v2/clusters/{PROBE}{name}/peers" for name in NAMES),
                     *(f"/admin/v2/tenants/{PROBE}{name}" for name in NAMES)):
            pair.same_read(path, after=f"{first} and {second} made {NAMES}")
        for k, name in enumerate(NAMES):
            if k % 2 == 0:
                for path in removed(k, name):
                    by(second if k % 4 else first, "DELETE", path)
        for path in listings:
            pair.same_read(path, after=f"{first} and {second} deleted {NAMES[::2]}")
        for k, name in enumerate(NAMES):
            if k % 2:
                for path in removed(k, name):
                    by(first if k % 4 == 1 else second, "DELETE", path)
        by(second, "DELETE", home)
        by(second, "DELETE", f"/admin/v2/tenants/{LIFE}")
        for path in listings[:-1]:
            pair.same_read(path, after=f"{first} and {second} deleted {NAMES}")
    assert pair.mismatches == [], "\n".join(pair.mismatches)
