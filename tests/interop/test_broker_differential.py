"""The admin API against the upstream broker (pulsar-broker 4.0.8) on stores of their own: two
chroots of the session's ZooKeeper, each formatted by upstream's `initialize-cluster-metadata`,
the broker on one and our service on the other, both with token authentication and
authorisation on. One seeded random sequence of requests over clusters, peers, failure
domains, isolation policies, tenants, namespaces, persistence, bookie affinity, replication,
racks and partitioned topics (created, read, listed and deleted: the broker has no bookies),
with names valid, odd and invalid, each as a super-user, a tenant's admin, another role
or nobody, goes to both: every answer must agree (status, the reason of a refusal, the JSON of a
read, keys in order), and after every write both stores must hold the same documents. A stored
difference is reported, then the broker's documents are copied onto ours so the sequence goes
on from one state.

What the README lists as kept differences is left out of the sequence or of the comparison
(`KEPT`): names over 255 characters, empty or free-form names refused by our rules, Jetty's
HTML error pages, `ClusterData`'s property order (compared as JSON), anti-affinity on
namespaces that do not exist, and the `is_allow_auto_update_schema` a broker's GET leaves in
its cache for its next write to store (`without_cached_fill`)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from metastore.embedded import free_port
from tests.interop.answers import in_order, refusal
from tests.interop.upstream import UpstreamBroker, initialize_cluster_metadata
from tests.support import ServerProcess, token, token_conf, wait_until
from tests.zookeeper import EmbeddedZooKeeper, RawZooKeeper

SEED = 20261128
STEPS = 480
SECURED = token_conf("admin")  # our service's; the broker's is the same, for its own store
# who asks: mostly a super-user; `r` administers the tenants whose bodies name it
ROLES = ["admin"] * 6 + ["r", "r", "other", None]
# documents both must write alike
COMPARED = ("/admin/policies", "/admin/local-policies", "/admin/clusters", "/bookies",
            "/admin/partitioned-topics", "/managed-ledgers")


@dataclass
class Sides:
    theirs: httpx.Client
    ours: httpx.Client
    raw_theirs: RawZooKeeper
    raw_ours: RawZooKeeper


@pytest.fixture(scope="module")
def sides(zookeeper: EmbeddedZooKeeper, upstream_broker_classpath: str,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sides]:
    work = tmp_path_factory.mktemp("differential")
    raws = {side: RawZooKeeper(zookeeper.hosts(), f"/differential-{side}")
            for side in ("theirs", "ours")}
    broker = service = None
    try:
        for side, raw in raws.items():
            raw.wipe()
            done = initialize_cluster_metadata(upstream_broker_classpath, work / side,
                                               f"zk:{zookeeper.hosts()}{raw.chroot}")
            assert done.code == 0, done
        broker_conf = {key: value for key, value in SECURED.items()
                       if key != "initializeClusterMetadata"}
        broker = UpstreamBroker(upstream_broker_classpath, work / "broker",
                                f"zk:{zookeeper.hosts()}{raws['theirs'].chroot}",
                                free_port(), free_port(), {
                                    **broker_conf,
                                    "brokerClientAuthenticationPlugin":
                                        "org.apache.pulsar.client.impl.auth.AuthenticationToken",
                                    "brokerClientAuthenticationParameters":
                                        f"token:{token('admin')}"})
        service = ServerProcess(f"zk:{zookeeper.hosts()}{raws['ours'].chroot}",
                                work / "service", extra_conf=SECURED).start()
        running = broker

        def ready() -> bool:
            if running.exited() is not None:
                raise AssertionError(f"broker exited: see {running.workdir}")
            return httpx.get(f"{running.web_url}/admin/v2/clusters", timeout=2,
                             headers=as_role("admin")).status_code == 200

        wait_until(ready, timeout=180, interval=0.5)
        with httpx.Client(base_url=broker.web_url, timeout=20) as theirs, \
                httpx.Client(base_url=service.url, timeout=20) as ours:
            yield Sides(theirs, ours, raws["theirs"], raws["ours"])
    finally:
        if broker is not None:
            broker.stop()
        if service is not None:
            service.stop()
        for raw in raws.values():
            raw.close()


# -- the sequence ----------------------------------------------------------------------------

# common names more often than odd ones, so that the sequence builds state to act on
TENANTS = ["t1", "t1", "t1", "t2", "t2", "public", "-", "=:.", "a b", "\u00e4", "a+b"]
NAMESPACES = ["n1", "n1", "n2", "default", "a.", "1"]
CLUSTERS = ["test", "test", "c2", "c2", "c3", "-", "a b"]
DOMAINS = ["d1", "d2"]
POLICIES = ["p1", "p2"]
BOOKIES = ["10.0.0.1:3181", "10.0.0.2:3181", "h:1"]
GROUPS = ["g1", "g2"]
TOPICS = ["p1", "p1", "p2", "q-partition-1", "__change_events", "a b"]
BODIES = {
    "tenant": [b'{"allowedClusters":["test"]}', b'{"allowedClusters":["test"]}',
               b'{"allowedClusters":["test"],"adminRoles":["r"]}',
               b'{"allowedClusters":["test","c2"],"adminRoles":["r"]}',
               b'{"allowedClusters":["nope"]}', b"{}",
               b'{"allowedClusters":[]}', b'{"adminRoles":["a","b"],"allowedClusters":["c2"]}'],
    "affinity": [b'{"bookkeeperAffinityGroupPrimary":"g1"}', b"{}",
                 b'{"bookkeeperAffinityGroupPrimary":"g1","bookkeeperAffinityGroupSecondary":'
                 b'"g2"}', b'{"bookkeeperAffinityGroupSecondary":"g2"}'],
    "persistence": [b'{"bookkeeperEnsemble":2,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":1,'
                    b'"managedLedgerMaxMarkDeleteRate":0}',
                    b'{"bookkeeperEnsemble":1,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":1}',
                    b"{}"],
    "replication": [b'["test"]', b'["test","c2"]', b'["nope"]', b"[]", b'["c2","test"]'],
    "rack": [b'{"rack":"/r1","hostname":"h1"}', b'{"rack":"r2"}', b'{"rack":""}', b"{}"],
    "domain": [b'{"brokers":["b1:8080"]}', b'{"brokers":["b1:8080","b2:8080"]}', b"{}",
               b'{"brokers":["b3:8080"]}'],
    "isolation": [
        b'{"namespaces":["t1/.*"],"primary":["b.*"],"secondary":[],"auto_failover_policy":'
        b'{"policy_type":"min_available","parameters":{"min_limit":"1","usage_threshold":"80"}}}',
        b'{"namespaces":["t2/n1"],"primary":["x"],"auto_failover_policy":{"policy_type":'
        b'"min_available","parameters":{"min_limit":"0","usage_threshold":"100"}}}',
        b'{"namespaces":[],"primary":["b.*"]}', b"{}"],
    "cluster": [b'{"serviceUrl":"http://a:8080"}', b"{}",
                b'{"serviceUrl":"http://b:8080","brokerServiceUrl":"pulsar://b:6650"}'],
    "peers": [b'["test"]', b'["c2"]', b"[]", b'["c2","c3"]'],
    "partitions": [b"2", b"2", b"1", b'"3"', b"0", b"-1"],
}


def as_role(role: str | None) -> dict[str, str]:
    return {} if role is None else {"Authorization": f"Bearer {token(role)}"}


def requests(rng: random.Random) -> Iterator[tuple[str | None, str, str, bytes | None]]:
    def body(kind: str) -> bytes:
        return rng.choice(BODIES[kind])

    # first some state to act on: a tenant `r` administers, a namespace, a partitioned topic
    yield "admin", "PUT", "/admin/v2/tenants/t1", b'{"allowedClusters":["test"],"adminRoles":["r"]}'
    yield "admin", "PUT", "/admin/v2/namespaces/t1/n1", None
    yield "r", "PUT", "/admin/v2/persistent/t1/n1/p2/partitions", b"2"
    for _ in range(STEPS):
        t, c = rng.choice(TENANTS), rng.choice(CLUSTERS)
        ns = f"{t}/{rng.choice(NAMESPACES)}"
        bookie, domain, policy = (rng.choice(BOOKIES), rng.choice(DOMAINS),
                                  rng.choice(POLICIES))
        cl = f"/admin/v2/clusters/{c}"
        topic = f"/admin/v2/persistent/{ns}/{rng.choice(TOPICS)}"
        yield rng.choice(ROLES), *rng.choice([
            ("PUT", f"/admin/v2/tenants/{t}", body("tenant")),
            ("POST", f"/admin/v2/tenants/{t}", body("tenant")),
            ("DELETE", f"/admin/v2/tenants/{t}", None),
            ("GET", f"/admin/v2/tenants/{t}", None), ("GET", "/admin/v2/tenants", None),
            ("PUT", f"/admin/v2/namespaces/{ns}", None),
            ("DELETE", f"/admin/v2/namespaces/{ns}", None),
            ("GET", f"/admin/v2/namespaces/{ns}", None),
            ("GET", f"/admin/v2/namespaces/{t}", None),
            ("POST", f"/admin/v2/namespaces/{ns}/persistence/bookieAffinity", body("affinity")),
            ("GET", f"/admin/v2/namespaces/{ns}/persistence/bookieAffinity", None),
            ("POST", f"/admin/v2/namespaces/{ns}/persistence", body("persistence")),
            ("GET", f"/admin/v2/namespaces/{ns}/persistence", None),
            ("DELETE", f"/admin/v2/namespaces/{ns}/persistence", None),
            ("POST", f"/admin/v2/namespaces/{ns}/replication", body("replication")),
            ("GET", f"/admin/v2/namespaces/{ns}/replication", None),
            ("POST", f"/admin/v2/bookies/racks-info/{bookie}?group={rng.choice(GROUPS)}",
             body("rack")),
            ("DELETE", f"/admin/v2/bookies/racks-info/{bookie}", None),
            ("GET", f"/admin/v2/bookies/racks-info/{bookie}", None),
            ("GET", "/admin/v2/bookies/racks-info", None),
            ("PUT", cl, body("cluster")), ("POST", cl, body("cluster")),
            # `test` stays: with it gone, most of the rest would be refused
            ("DELETE", f"/admin/v2/clusters/{rng.choice(CLUSTERS[2:])}", None),
            ("GET", cl, None), ("GET", "/admin/v2/clusters", None),
            ("POST", f"{cl}/peers", body("peers")), ("GET", f"{cl}/peers", None),
            ("POST", f"{cl}/failureDomains/{domain}", body("domain")),
            ("DELETE", f"{cl}/failureDomains/{domain}", None),
            ("GET", f"{cl}/failureDomains", None), ("GET", f"{cl}/failureDomains/{domain}", None),
            ("POST", f"{cl}/namespaceIsolationPolicies/{policy}", body("isolation")),
            ("DELETE", f"{cl}/namespaceIsolationPolicies/{policy}", None),
            ("GET", f"{cl}/namespaceIsolationPolicies", None),
            ("GET", f"{cl}/namespaceIsolationPolicies/{policy}", None),
            *[("PUT", f"{topic}/partitions", body("partitions"))] * 4,  # to build some
            ("GET", f"{topic}/partitions", None),
            ("DELETE", f"{topic}/partitions", None),
            ("GET", f"/admin/v2/persistent/{ns}/partitioned", None),
        ])


# -- the comparison --------------------------------------------------------------------------

def stored(raw: RawZooKeeper) -> dict[str, bytes]:
    return {key: value for key, value in raw.snapshot().items() if key.startswith(COMPARED)}


def compared(documents: dict[str, bytes]) -> dict[str, Any]:
    """Cluster data as parsed JSON (its property order is kept apart, see the module's
    docstring), the rest as bytes."""
    return {key: json.loads(value) if key.startswith("/admin/clusters/") and value else value
            for key, value in documents.items()}


FILLED = b'"is_allow_auto_update_schema":true,'


def without_cached_fill(theirs: dict[str, bytes], ours: dict[str, bytes]) -> dict[str, bytes]:
    """The broker's documents, less the `is_allow_auto_update_schema` its GET of a namespace
    fills into the Policies object its metadata cache holds, which its next write of that
    namespace then stores (README, "Compatibility"); ours never stores what a read shows."""
    return {key: value.replace(FILLED, b"", 1)
            if FILLED in value and b"is_allow_auto_update_schema" not in ours.get(key, FILLED)
            else value for key, value in theirs.items()}


def resync(raw: RawZooKeeper, wanted: dict[str, bytes], held: dict[str, bytes]) -> None:
    for key in set(held) - set(wanted):
        raw.delete(key)
    for key, value in wanted.items():
        if held.get(key) != value:
            raw.put(key, value)


def test_a_random_sequence_answers_and_stores_as_the_broker(sides: Sides) -> None:
    mismatches: list[str] = []
    written = 0  # writes the broker took: the sequence must change state, not only be refused
    partitioned = 0  # partitioned topics the broker created
    for step, (role, method, path, body) in enumerate(requests(random.Random(SEED))):
        headers = {"Content-Type": "application/json"} if body is not None else {}
        headers.update(as_role(role))
        theirs = sides.theirs.request(method, path, content=body, headers=headers)
        ours = sides.ours.request(method, path, content=body, headers=headers)
        what = f"[{step}] {role} {method} {path} {body!r}"
        written += method != "GET" and theirs.status_code < 300
        partitioned += method == "PUT" and path.endswith("/partitions") and theirs.is_success
        if theirs.status_code != ours.status_code:
            mismatches.append(f"{what}: {theirs.status_code} {theirs.text[:200]!r} against "
                              f"ours {ours.status_code} {ours.text[:200]!r}")
        elif theirs.status_code >= 400 and not theirs.text.startswith("<"):
            if refusal(theirs) not in refusal(ours):
                mismatches.append(f"{what}: {refusal(theirs)!r} against {refusal(ours)!r}")
        elif method == "GET" and theirs.status_code < 300 and in_order(theirs) != in_order(ours):
            mismatches.append(f"{what}: {theirs.text[:300]!r} against {ours.text[:300]!r}")
        if method != "GET":
            wanted, held = stored(sides.raw_theirs), stored(sides.raw_ours)
            expected, found = compared(without_cached_fill(wanted, held)), compared(held)
            if expected != found:
                for key in sorted(set(expected) | set(found)):
                    if expected.get(key) != found.get(key):
                        mismatches.append(f"{what}: stored {key} {expected.get(key)!r:.200} "
                                          f"against ours {found.get(key)!r:.200}")
            if wanted != held:  # the same state on both sides before the next step
                resync(sides.raw_ours, wanted, held)
                wait_until(lambda: ours_serves(sides), timeout=10)
    assert mismatches == [], "\n".join(mismatches)
    print(f"{written} writes taken, {partitioned} partitioned topics created")
    assert written >= 25 and partitioned >= 2


def ours_serves(sides: Sides) -> bool:
    """Our service reads what was copied onto its store (its caches are fed by the watch)."""
    admin = as_role("admin")
    return sides.ours.get("/admin/v2/tenants", headers=admin).json() == sides.theirs.get(
        "/admin/v2/tenants", headers=admin).json()
