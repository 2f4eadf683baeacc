"""Partitioned topics over HTTP on the real service with real bookie processes: the metadata
and the partitions' managed-ledger records as the 4.0.8 broker writes them, produce spread
over the partitions inside a strict namespace's groups, growing, deleting, the broker's
refusals word for word, and concurrent writers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from metastore import paths
from metastore.ledger_metadata import decode_ledger_metadata
from metastore.managed_ledger_info import decode_managed_ledger_info
from tests.storage.testbed import Cluster
from tests.support import RawEtcd, ServerProcess
from tests.zookeeper import ON_BOTH_STORES

ADMIN = "/admin/v2/persistent/acme"
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def http(topic_service: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=topic_service.url, timeout=30) as client:
        yield client


def create(http: httpx.Client, namespace: str, topic: str, body: bytes | str) -> httpx.Response:
    content = body.encode() if isinstance(body, str) else body
    return http.put(f"{ADMIN}/{namespace}/{topic}/partitions", content=content, headers=JSON)


def answer(response: httpx.Response) -> tuple[int, str | None]:
    reason = response.json().get("reason") if response.content else None
    return response.status_code, reason


def managed_ledger_key(namespace: str, topic: str) -> str:
    return paths.managed_ledger("acme", namespace, topic)


def test_a_partitioned_topics_life(http: httpx.Client, topic_cluster: Cluster) -> None:
    raw = topic_cluster.raw
    assert create(http, "strict", "orders", "3").status_code == 204
    # stored as the broker stores it: the metadata, and an empty record per partition
    assert raw.get(paths.partitioned_topic("acme", "strict", "orders")) == (
        b'{"partitions":3,"deleted":false}')
    for index in range(3):
        assert raw.get(managed_ledger_key("strict", f"orders-partition-{index}")) == b""
    assert http.get(f"{ADMIN}/strict/partitioned").json() == ["persistent://acme/strict/orders"]
    assert http.get(f"{ADMIN}/strict/orders/partitions").json() == {
        "partitions": 3, "deleted": False}
    assert http.get(f"{ADMIN}/strict/orders-partition-1/partitions").json() == {
        "partitions": 0, "deleted": False}
    assert [t for t in http.get(f"{ADMIN}/strict").json() if "orders" in t] == [
        f"persistent://acme/strict/orders-partition-{i}" for i in range(3)]
    # the name is taken, as a partitioned topic and by its partitions
    assert answer(create(http, "strict", "orders", "3")) == (409, "This topic already exists")
    assert answer(http.put(f"{ADMIN}/strict/orders")) == (409, "This topic already exists")
    assert answer(http.put(f"{ADMIN}/strict/orders-partition-1")) == (
        409, "This topic already exists")
    assert answer(http.put(f"{ADMIN}/strict/orders-partition-3")) == (412, (
        "Can't create topic orders-partition-3 with \"-partition-\" followed by a number "
        "smaller than number of partition of partitioned topic orders"))
    assert answer(http.delete(f"{ADMIN}/strict/orders")) == (409, (
        "persistent://acme/strict/orders is a partitioned topic, instead of calling delete "
        "topic, please call delete-partitioned-topic."))

    # produce: message i to partition i mod 3, each partition's ledgers in the strict group
    produced = http.post("/topics/persistent/acme/strict/orders", json={
        "messages": [{"payload": f"m{i}"} for i in range(7)]})
    assert produced.status_code == 200, produced.text
    acks = produced.json()["messagePublishResults"]
    partitions = [int(ack["messageId"].split(":")[2]) for ack in acks]
    assert partitions == [0, 1, 2, 0, 1, 2, 0]
    iso = set(topic_cluster.ids[:2])
    for index, ack in enumerate(acks):
        ledger, entry, partition = ack["messageId"].split(":")
        got = http.get(f"{ADMIN}/strict/orders-partition-{partition}/ledger/{ledger}"
                       f"/entry/{entry}")
        assert got.status_code == 200 and got.content == f"m{index}".encode()
        metadata = decode_ledger_metadata(int(ledger), raw.get(paths.ledger(int(ledger))) or b"")
        assert {b for ensemble in metadata.ensembles.values() for b in ensemble} <= iso

    # grow: the new partitions' records and the count together; never shrink
    assert http.post(f"{ADMIN}/strict/orders/partitions", content=b"5",
                     headers=JSON).status_code == 204
    assert raw.get(managed_ledger_key("strict", "orders-partition-4")) == b""
    assert http.get(f"{ADMIN}/strict/orders/partitions").json()["partitions"] == 5
    assert answer(http.post(f"{ADMIN}/strict/orders/partitions", content=b"2",
                            headers=JSON)) == (
        422, "Desired partitions 2 can't be less than the current partitions 5.")
    assert http.post(f"{ADMIN}/strict/orders/partitions", content=b"5",
                     headers=JSON).status_code == 204

    # every partition's internal stats, under the metadata
    stats = http.get(f"{ADMIN}/strict/orders/partitioned-internalStats").json()
    assert stats["metadata"] == {"partitions": 5, "deleted": False}
    assert sorted(stats["partitions"]) == [
        f"persistent://acme/strict/orders-partition-{i}" for i in range(5)]
    assert stats["partitions"]["persistent://acme/strict/orders-partition-0"][
        "entriesAddedCounter"] == 3  # messages 0, 3 and 6
    assert answer(http.get(f"{ADMIN}/strict/orders-partition-1/partitioned-internalStats")) == (
        404, "Partitioned Topic persistent://acme/strict/orders-partition-1 not found")

    # a partition deleted alone: its reads say the partitions are not there yet
    assert http.delete(f"{ADMIN}/strict/orders-partition-0").status_code == 204
    assert answer(http.get(f"{ADMIN}/strict/orders-partition-0/internalStats")) == (
        404, "Topic partitions were not yet created")

    # delete: every partition's managed ledger and ledgers, then the metadata
    ledgers = [lid for index in range(1, 5)
               for lid in _ledger_ids(raw.get(managed_ledger_key("strict",
                                                                f"orders-partition-{index}")))]
    assert ledgers  # partitions 1 and 2 hold produced messages
    assert http.delete(f"{ADMIN}/strict/orders/partitions").status_code == 204
    assert raw.get(paths.partitioned_topic("acme", "strict", "orders")) is None
    for index in range(5):
        assert raw.get(managed_ledger_key("strict", f"orders-partition-{index}")) is None
    for ledger_id in ledgers:
        assert raw.get(paths.ledger(ledger_id)) is None
    assert answer(http.get(f"{ADMIN}/strict/orders/partitions")) == (
        404, "Topic persistent://acme/strict/orders not found")
    assert http.get(f"{ADMIN}/strict/partitioned").json() == []


def _ledger_ids(info: bytes | None) -> list[int]:
    if not info:
        return []
    return [ledger.ledger_id for ledger in decode_managed_ledger_info(info).ledgers]


@pytest.mark.parametrize(("method", "path", "body", "expected"), [
    # bodies as Jackson binds an `int`
    ("PUT", "plain/z0/partitions", "0", (406, "Number of partitions should be more than 0")),
    ("PUT", "plain/z1/partitions", "-1", (406, "Number of partitions should be more than 0")),
    ("PUT", "plain/z2/partitions", "", (400, "The request entity cannot be empty.")),
    ("PUT", "plain/z3/partitions", "true", (400, None)),
    ("PUT", "plain/z4/partitions", "[2]", (400, None)),
    ("PUT", "plain/z5/partitions", "abc", (400, None)),
    ("PUT", "plain/z6/partitions", "2147483648", (400, None)),
    # names, in the broker's order of checks
    ("PUT", "plain/q-partition-1/partitions", "2",
     (412, "Partitioned Topic Name should not contain '-partition-'")),
    ("PUT", "plain/q-partition-x/partitions", "2",
     (412, "Partitioned Topic Name should not contain '-partition-'")),
    ("PUT", "plain/x__transaction_pending_ack/partitions", "2",
     (400, "Cannot create topic in system topic format!")),
    ("PUT", "nope/x/partitions", "0", (404, "Namespace not found")),
    ("PUT", "bad%20ns/x/partitions", "2", (412, "Namespace name is not valid")),
    ("GET", "nope/partitioned", None, (404, "Namespace does not exist")),
    ("GET", "bad%20ns/partitioned", None, (412, "Namespace name is not valid")),
    ("GET", "nope/x/partitions", None, (404, "Namespace not found")),
    ("GET", "bad%20ns/x/partitions", None, (412, "Topic name is not valid")),
    ("GET", "plain/missing/partitions", None,
     (404, "Topic persistent://acme/plain/missing not found")),
    ("POST", "plain/missing/partitions", "3",
     (409, "Topic persistent://acme/plain/missing is not the partitioned topic.")),
    ("POST", "plain/p-partition-0/partitions", "3",
     (412, "Partitioned Topic Name should not contain '-partition-'")),
    ("POST", "bad%20ns/x/partitions", "3", (412, "Topic name is not valid")),
    ("DELETE", "plain/missing/partitions", None,
     (404, "Topic persistent://acme/plain/missing not found.")),
    ("DELETE", "plain/p-partition-0/partitions", None,
     (412, "Partitioned Topic Name should not contain '-partition-'")),
    ("DELETE", "nope/x/partitions", None, (404, "Topic persistent://acme/nope/x not found.")),
])
def test_refusals_in_the_brokers_words(http: httpx.Client, topic_cluster: Cluster, method: str,
                                       path: str, body: str | None,
                                       expected: tuple[int, str | None]) -> None:
    before = _documents(topic_cluster)
    response = http.request(method, f"{ADMIN}/{path}", headers=JSON,
                            content=None if body is None else body.encode())
    status, reason = expected
    assert response.status_code == status, response.text
    if reason is not None:
        assert response.json() == {"reason": reason}
    after = _documents(topic_cluster)
    # a refusal changes nothing but the local policies a broker's ownership check (which a
    # DELETE runs before looking for the topic) leaves in a namespace that had none
    loaded = {key: value for key, value in after.items() if key not in before
              and key.startswith("/admin/local-policies/") and method == "DELETE"}
    assert after == {**before, **loaded}


def _documents(cluster: Cluster) -> dict[str, bytes | None]:
    keys = cluster.raw.keys("/admin/") + cluster.raw.keys("/managed-ledgers/")
    return {key: cluster.raw.get(key) for key in keys}


def test_counts_bound_as_jackson_reads_an_int(http: httpx.Client) -> None:
    for topic, body, count in (("j1", '"2"', 2), ("j2", "2.7", 2), ("j3", " 3 ", 3),
                               ("j4", "1e1", 10)):
        assert create(http, "plain", topic, body).status_code == 204, body
        assert http.get(f"{ADMIN}/plain/{topic}/partitions").json()["partitions"] == count
        assert http.delete(f"{ADMIN}/plain/{topic}/partitions").status_code == 204


def test_produce_to_one_partition(http: httpx.Client) -> None:
    assert create(http, "plain", "pp", "2").status_code == 204
    try:
        body = {"messages": [{"payload": "a"}, {"payload": "b"}]}
        to_one = http.post("/topics/persistent/acme/plain/pp/partitions/1", json=body)
        assert to_one.status_code == 200, to_one.text
        assert [ack["messageId"].split(":")[2] for ack in
                to_one.json()["messagePublishResults"]] == ["1", "1"]
        # a partition the topic does not have: each message unpublished, in the broker's words
        beyond = http.post("/topics/persistent/acme/plain/pp/partitions/5", json=body)
        assert beyond.status_code == 200
        assert beyond.json()["messagePublishResults"] == [{
            "errorMsg": "org.apache.pulsar.broker.service.BrokerServiceException$"
                        "TopicNotFoundException: Topic not owned by current broker.",
            "messageId": "5", "errorCode": 2, "schemaVersion": 0}] * 2
        assert answer(http.post("/topics/persistent/acme/plain/pp-partition-0/partitions/0",
                                json=body)) == (
            400, "Topic name can't contain '-partition-' suffix.")
    finally:
        assert http.delete(f"{ADMIN}/plain/pp/partitions").status_code == 204


def test_produce_creates_no_topic_the_broker_would_not(http: httpx.Client,
                                                         topic_cluster: Cluster) -> None:
    """A partition's name outside a partitioned topic, or nothing to publish: 404, and no
    managed ledger made (the broker makes none either)."""
    assert create(http, "plain", "two", "2").status_code == 204
    try:
        one = {"messages": [{"payload": "x"}]}
        for topic, body in (("stray-partition-0", one), ("two-partition-2", one),
                            ("nothing-yet", {"messages": []})):
            refused = http.post(f"/topics/persistent/acme/plain/{topic}", json=body)
            assert answer(refused) == (404, f"Topic persistent://acme/plain/{topic} not found")
            assert topic_cluster.raw.get(managed_ledger_key("plain", topic)) is None
        # a partition of the partitioned topic is produced to like any topic
        inside = http.post("/topics/persistent/acme/plain/two-partition-1", json=one)
        assert inside.status_code == 200
        assert inside.json()["messagePublishResults"][0]["messageId"].endswith(":-1")
    finally:
        assert http.delete(f"{ADMIN}/plain/two/partitions").status_code == 204


def test_non_partitioned_and_system_topics(http: httpx.Client) -> None:
    assert http.put(f"{ADMIN}/plain/single").status_code == 204
    try:
        assert http.get(f"{ADMIN}/plain/single/partitions").json() == {
            "partitions": 0, "deleted": False}
        assert answer(create(http, "plain", "single", "2")) == (409, "This topic already exists")
        assert answer(http.post(f"{ADMIN}/plain/single/partitions", content=b"3",
                                headers=JSON)) == (
            409, "Topic persistent://acme/plain/single is not the partitioned topic.")
        assert answer(http.delete(f"{ADMIN}/plain/single/partitions")) == (409, (
            "persistent://acme/plain/single is a non-partitioned topic. Instead of calling "
            "delete-partitioned-topic please call delete."))
        # a missing topic that the first produce would create: 0 partitions when asked so
        assert http.get(f"{ADMIN}/plain/later/partitions",
                        params={"checkAllowAutoCreation": "true"}).json()["partitions"] == 0
    finally:
        http.delete(f"{ADMIN}/plain/single")
    assert create(http, "plain", "__change_events", "2").status_code == 204
    assert create(http, "plain", "visible", "1").status_code == 204
    try:
        assert http.get(f"{ADMIN}/plain/partitioned").json() == [
            "persistent://acme/plain/visible"]
        for flag in ("true", "TRUE"):
            assert http.get(f"{ADMIN}/plain/partitioned",
                            params={"includeSystemTopic": flag}).json() == [
                "persistent://acme/plain/__change_events", "persistent://acme/plain/visible"]
        assert http.get(f"{ADMIN}/plain/partitioned",
                        params={"includeSystemTopic": "abc"}).json() == [
            "persistent://acme/plain/visible"]
        refused = http.delete("/admin/v2/namespaces/acme/plain")
        assert refused.status_code == 409
    finally:
        for topic in ("__change_events", "visible"):
            assert http.delete(f"{ADMIN}/plain/{topic}/partitions").status_code == 204


def test_concurrent_writers(http: httpx.Client, topic_cluster: Cluster,
                            topic_service: ServerProcess) -> None:
    def put(_: int) -> int:
        with httpx.Client(base_url=topic_service.url, timeout=30) as client:
            return create(client, "plain", "race", "4").status_code

    with ThreadPoolExecutor(8) as pool:
        created = list(pool.map(put, range(8)))
    assert sorted(created) == [204] + [409] * 7

    def grow(count: int) -> int:
        with httpx.Client(base_url=topic_service.url, timeout=30) as client:
            return client.post(f"{ADMIN}/plain/race/partitions", content=str(count).encode(),
                               headers=JSON).status_code

    with ThreadPoolExecutor(8) as pool:
        grown = dict(zip(range(5, 13), pool.map(grow, range(5, 13)), strict=True))
    assert set(grown.values()) <= {204, 422}
    final = json.loads(topic_cluster.raw.get(paths.partitioned_topic("acme", "plain", "race"))
                       or b"{}")["partitions"]
    assert final == 12 and grown[12] == 204  # the largest always lands; none is lost
    for index in range(final):  # every partition of the final count has its record
        assert topic_cluster.raw.get(managed_ledger_key("plain", f"race-partition-{index}")) \
            is not None
    assert http.delete(f"{ADMIN}/plain/race/partitions").status_code == 204


@ON_BOTH_STORES
def test_admin_operations_on_either_store(admin: httpx.Client, clean_store: RawEtcd) -> None:
    """Without bookies (nothing produced), the same documents land on etcd and on ZooKeeper,
    where the partitions' records need their parent znodes made in the same `multi`."""
    admin.put("/admin/v2/clusters/c1", json={"serviceUrl": "http://c1"}).raise_for_status()
    admin.put("/admin/v2/tenants/t", json={"allowedClusters": ["c1"]}).raise_for_status()
    admin.put("/admin/v2/namespaces/t/ns", json={"replication_clusters": ["c1"]}
              ).raise_for_status()
    base = "/admin/v2/persistent/t/ns"
    assert admin.put(f"{base}/sp%C3%A4ce name/partitions", content=b"2",
                     headers=JSON).status_code == 204
    encoded = "sp%C3%A4ce+name"  # Java's URLEncoder, as the managed ledgers are named
    assert clean_store.get(paths.partitioned_topic("t", "ns", encoded)) == (
        b'{"partitions":2,"deleted":false}')
    assert clean_store.get(paths.managed_ledger("t", "ns", f"{encoded}-partition-1")) == b""
    assert admin.get(f"{base}/partitioned").json() == ["persistent://t/ns/späce name"]
    assert admin.post(f"{base}/sp%C3%A4ce name/partitions", content=b"3",
                      headers=JSON).status_code == 204
    assert clean_store.get(paths.managed_ledger("t", "ns", f"{encoded}-partition-2")) == b""
    assert admin.get(f"{base}/sp%C3%A4ce name/partitions").json() == {
        "partitions": 3, "deleted": False}
    assert admin.delete("/admin/v2/namespaces/t/ns").status_code == 409  # not empty
    assert admin.delete(f"{base}/sp%C3%A4ce name/partitions").status_code == 204
    assert clean_store.keys(paths.partitioned_topics("t", "ns") + "/") == []
    assert clean_store.keys(paths.managed_ledger("t", "ns", "")) == []
    assert admin.delete("/admin/v2/namespaces/t/ns").status_code == 204
