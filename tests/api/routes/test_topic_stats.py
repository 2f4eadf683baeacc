"""A topic's and a partitioned topic's stats over HTTP on the real service with real bookie
processes, as the 4.0.8 broker answers them (its answers probed live: the same properties in
the same order, its aggregate's Java defaults, its refusals word for word)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from javaformats import hash_map_order
from metastore import paths
from tests.storage.testbed import Cluster
from tests.support import ServerProcess, wait_until

ADMIN = "/admin/v2/persistent/acme"
JSON = {"Content-Type": "application/json"}
# TopicStatsImpl's properties in the order the broker writes them (a topic with no producers,
# subscriptions or topic epoch: Jackson leaves the nulls out)
TOPIC_STATS_KEYS = [
    "msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "bytesInCounter",
    "msgInCounter", "systemTopicBytesInCounter", "bytesOutCounter", "msgOutCounter",
    "bytesOutInternalCounter", "averageMsgSize", "msgChunkPublished", "storageSize",
    "backlogSize", "backlogQuotaLimitSize", "backlogQuotaLimitTime",
    "oldestBacklogMessageAgeSeconds", "publishRateLimitedTimes",
    "earliestMsgPublishTimeInBacklogs", "offloadedStorageSize", "lastOffloadLedgerId",
    "lastOffloadSuccessTimeStamp", "lastOffloadFailureTimeStamp", "ongoingTxnCount",
    "abortedTxnCount", "committedTxnCount", "publishers", "waitingPublishers", "subscriptions",
    "replication", "deduplicationStatus", "nonContiguousDeletedMessagesRanges",
    "nonContiguousDeletedMessagesRangesSerializedSize", "delayedMessageIndexSizeInBytes",
    "compaction", "ownerBroker",
]
# PartitionedTopicStatsImpl: no deduplication status or owner, then the metadata and partitions
PARTITIONED_KEYS = [k for k in TOPIC_STATS_KEYS if k not in ("deduplicationStatus", "ownerBroker")
                    ] + ["metadata", "partitions"]


@pytest.fixture
def http(topic_service: ServerProcess) -> Iterator[httpx.Client]:
    """A client of the shared service; the topics a test made (`stats-*` in `acme/plain`) go
    with it, so other modules' listings of the namespace do not see them."""
    with httpx.Client(base_url=topic_service.url, timeout=30) as client:
        yield client
        prefix = "persistent://acme/plain/stats-"
        for name in client.get(f"{ADMIN}/plain/partitioned").json():
            if name.startswith(prefix):
                local = name.rsplit("/", 1)[1]
                gone = client.delete(f"{ADMIN}/plain/{local}/partitions?force=true")
                assert gone.status_code == 204, gone.text
        for name in client.get(f"{ADMIN}/plain").json():
            if name.startswith(prefix):
                gone = client.delete(f"{ADMIN}/plain/{name.rsplit('/', 1)[1]}")
                assert gone.status_code == 204, gone.text


def answer(response: httpx.Response) -> tuple[int, str | None]:
    return response.status_code, response.json().get("reason")


def produce(http: httpx.Client, topic: str, count: int) -> None:
    produced = http.post(f"/topics/persistent/acme/plain/{topic}", json={
        "messages": [{"payload": f"message {i}"} for i in range(count)]})
    assert produced.status_code == 200, produced.text


def test_a_topics_stats(http: httpx.Client, topic_service: ServerProcess) -> None:
    assert http.put(f"{ADMIN}/plain/stats-plain").status_code == 204
    empty = http.get(f"{ADMIN}/plain/stats-plain/stats")
    assert empty.status_code == 200, empty.text
    assert list(empty.json()) == TOPIC_STATS_KEYS
    assert empty.json()["storageSize"] == 0
    produce(http, "stats-plain", 25)  # more than one ledger: rollover every 10 entries
    stats = http.get(f"{ADMIN}/plain/stats-plain/stats").json()
    internal = http.get(f"{ADMIN}/plain/stats-plain/internalStats").json()
    assert len(internal["ledgers"]) > 1
    assert stats["storageSize"] == internal["totalSize"] > 25 * len("message 0")
    assert stats == {**empty.json(), "storageSize": stats["storageSize"]}
    assert (stats["msgInCounter"], stats["bytesInCounter"], stats["msgRateIn"]) == (0, 0, 0.0)
    assert (stats["backlogQuotaLimitSize"], stats["backlogQuotaLimitTime"]) == (-1, -1)
    assert stats["oldestBacklogMessageAgeSeconds"] == -1
    assert stats["deduplicationStatus"] == "Disabled"
    assert stats["ownerBroker"] == f"localhost:{topic_service.port}"
    # the broker's query options are taken, and change nothing here
    options = ("getPreciseBacklog=true&subscriptionBacklogSize=false&getEarliestTimeInBacklog="
               "true&excludePublishers=true&excludeConsumers=true&authoritative=true")
    assert http.get(f"{ADMIN}/plain/stats-plain/stats?{options}").json() == stats


def test_backlog_quotas_come_from_the_namespaces_policies(http: httpx.Client,
                                                         topic_cluster: Cluster) -> None:
    """A quota a broker set on the namespace (`backlog_quota_map`, BacklogQuotaImpl's JSON)."""
    key = paths.namespace("acme", "plain")
    stored = json.loads(topic_cluster.raw.get(key))
    before = dict(stored.get("backlog_quota_map", {}))
    stored["backlog_quota_map"] = {
        "destination_storage": {"limit": 1048576, "limitSize": 1048576, "limitTime": -1,
                                "policy": "producer_request_hold"},
        "message_age": {"limit": -1, "limitSize": -1, "limitTime": 3600,
                        "policy": "producer_exception"},
    }
    topic_cluster.raw.put(key, json.dumps(stored).encode())
    try:
        assert http.put(f"{ADMIN}/plain/stats-quota").status_code == 204

        def limits() -> tuple[int, int]:
            stats = http.get(f"{ADMIN}/plain/stats-quota/stats").json()
            return stats["backlogQuotaLimitSize"], stats["backlogQuotaLimitTime"]

        assert wait_until(lambda: limits() == (1048576, 3600), timeout=10)
    finally:
        stored["backlog_quota_map"] = before
        topic_cluster.raw.put(key, json.dumps(stored).encode())


def test_a_partitioned_topics_stats(http: httpx.Client) -> None:
    created = http.put(f"{ADMIN}/plain/stats-p/partitions", content=b"3", headers=JSON)
    assert created.status_code == 204
    produce(http, "stats-p", 7)  # to partitions 0, 1, 2, 0, 1, 2, 0
    stats = http.get(f"{ADMIN}/plain/stats-p/partitioned-stats")
    assert stats.status_code == 200, stats.text
    total = stats.json()
    assert list(total) == PARTITIONED_KEYS
    names = [f"persistent://acme/plain/stats-p-partition-{i}" for i in range(3)]
    # each partition's stats, by name in a Java HashMap's order
    assert list(total["partitions"]) == list(hash_map_order((n, 0) for n in names))
    each = {name: http.get(f"{ADMIN}/plain/{name.rsplit('/', 1)[1]}/stats").json()
            for name in names}
    assert total["partitions"] == each
    assert each[names[0]]["storageSize"] > each[names[1]]["storageSize"] > 0
    assert total["storageSize"] == sum(s["storageSize"] for s in each.values())
    assert total["metadata"] == {"partitions": 3, "deleted": False}
    # the aggregate starts from Java's defaults: 0 where a topic shows -1
    assert total["oldestBacklogMessageAgeSeconds"] == 0
    assert (total["backlogQuotaLimitSize"], total["backlogQuotaLimitTime"]) == (-1, -1)
    assert list(total["partitions"][names[0]]) == TOPIC_STATS_KEYS
    alone = http.get(f"{ADMIN}/plain/stats-p/partitioned-stats?perPartition=false").json()
    assert alone == {**total, "partitions": {}}


def test_partitions_without_a_managed_ledger_are_left_out(http: httpx.Client,
                                                         topic_cluster: Cluster) -> None:
    created = http.put(f"{ADMIN}/plain/stats-gone/partitions", content=b"2", headers=JSON)
    assert created.status_code == 204
    for index in range(2):  # never opened: their records are all there is of them
        topic_cluster.raw.delete(paths.managed_ledger("acme", "plain",
                                                      f"stats-gone-partition-{index}"))
    stats = http.get(f"{ADMIN}/plain/stats-gone/partitioned-stats").json()
    # no partition answered: the broker lists the topic's own name with empty stats
    base = "persistent://acme/plain/stats-gone"
    assert list(stats["partitions"]) == [base]
    empty = stats["partitions"][base]
    assert "ownerBroker" not in empty and "deduplicationStatus" not in empty
    assert (empty["oldestBacklogMessageAgeSeconds"], empty["backlogQuotaLimitSize"]) == (0, 0)
    assert (stats["storageSize"], stats["backlogQuotaLimitSize"]) == (0, 0)


@pytest.mark.parametrize(("path", "expected"), [
    ("plain/stats-missing/stats", (404, "Topic persistent://acme/plain/stats-missing not found")),
    ("nope/x/stats", (404, "Namespace not found")),
    ("plain/stats-missing/partitioned-stats",
     (404, "Partitioned Topic persistent://acme/plain/stats-missing not found")),
    ("plain/stats-np-partition-0/partitioned-stats",
     (412, "Partitioned Topic Name should not contain '-partition-'")),
    ("nope/x/partitioned-stats", (404, "Namespace not found")),
    # a partition's name whose topic is not partitioned (`topicNotFoundReasonAsync`)
    ("plain/stats-missing-partition-0/stats", (404, "Partitioned Topic not found: "
     "persistent://acme/plain/stats-missing-partition-0 has zero partitions")),
    ("plain/stats-missing-partition-0/internalStats", (404, "Partitioned Topic not found: "
     "persistent://acme/plain/stats-missing-partition-0 has zero partitions")),
])
def test_refusals_in_the_brokers_words(http: httpx.Client, path: str,
                                       expected: tuple[int, str]) -> None:
    assert answer(http.get(f"{ADMIN}/{path}")) == expected


def test_a_partitioned_topic_and_a_plain_one_answer_each_others_404(http: httpx.Client) -> None:
    assert http.put(f"{ADMIN}/plain/stats-np").status_code == 204
    assert http.put(f"{ADMIN}/plain/stats-pp/partitions", content=b"2",
                    headers=JSON).status_code == 204
    assert answer(http.get(f"{ADMIN}/plain/stats-pp/stats")) == (
        404, "Topic persistent://acme/plain/stats-pp not found")
    assert answer(http.get(f"{ADMIN}/plain/stats-np/partitioned-stats")) == (
        404, "Partitioned Topic persistent://acme/plain/stats-np not found")
    # a partition beyond the count: not yet created; of the plain topic: zero partitions
    assert answer(http.get(f"{ADMIN}/plain/stats-pp-partition-2/stats")) == (
        404, "Topic partitions were not yet created")
    assert answer(http.get(f"{ADMIN}/plain/stats-np-partition-0/stats")) == (404, (
        "Partitioned Topic not found: persistent://acme/plain/stats-np-partition-0 has zero "
        "partitions"))
