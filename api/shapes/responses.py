"""Inline response shapes (lists of names, maps by name), each with the description and
example the OpenAPI document shows. The JSON on the wire is the plain list or map."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from api.shapes.models import (
    EXAMPLE_BROKER_ISOLATION,
    EXAMPLE_ISOLATION,
    BookieInfo,
    BrokerNamespaceIsolationData,
    FailureDomain,
    NamespaceIsolationData,
)

RackMap = Annotated[
    dict[str, dict[str, BookieInfo]],
    Field(
        description="Bookie group -> bookie id -> rack info, both levels sorted by key",
        examples=[
            {
                "default": {"127.0.0.1:3181": {"rack": "/rack1", "hostname": "127.0.0.1"}},
                "group-ssd": {"10.0.0.7:3181": {"rack": "/rack2"}},
            }
        ],
    ),
]
RuntimeConfiguration = Annotated[
    dict[str, str],
    Field(
        description="Setting name -> value, as strings",
        examples=[{"clusterName": "standalone", "webServicePort": "8080"}],
    ),
]
BrokerIds = Annotated[
    list[str],
    Field(
        description="Broker ids, host:webServicePort",
        examples=[["broker-1.example.com:8080", "broker-2.example.com:8080"]],
    ),
]
ClusterNames = Annotated[
    list[str], Field(description="Cluster names", examples=[["standalone", "us-west"]])
]
TenantNames = Annotated[list[str], Field(description="Tenant names", examples=[["public", "ops"]])]
NamespaceNames = Annotated[
    list[str],
    Field(
        description="Namespaces as tenant/namespace",
        examples=[["public/default", "public/orders"]],
    ),
]
FailureDomains = Annotated[
    dict[str, FailureDomain],
    Field(
        description="Failure domain name -> its brokers",
        examples=[{"zone-a": {"brokers": ["broker-1.example.com:8080"]}}],
    ),
]
IsolationPolicies = Annotated[
    dict[str, NamespaceIsolationData],
    Field(
        description="Isolation policy name -> policy",
        examples=[{"policy-ssd": EXAMPLE_ISOLATION}],
    ),
]
BrokersIsolation = Annotated[
    list[BrokerNamespaceIsolationData],
    Field(
        description="Every registered broker with the isolation policy naming it",
        examples=[
            [
                EXAMPLE_BROKER_ISOLATION,
                {"brokerName": "broker-9.example.com:8080", "primary": False, "namespaceRegex": []},
            ]
        ],
    ),
]
TopicNames = Annotated[
    list[str],
    Field(
        description="Topics of the namespace, as `persistent://tenant/namespace/topic`",
        examples=[["persistent://public/default/orders", "persistent://public/default/audit"]],
    ),
]
EXAMPLE_PRODUCER_MESSAGES: dict[str, Any] = {
    "producerName": "rest-producer-1",
    "messages": [
        {
            "payload": "hello",
            "key": "order-17",
            "properties": {"source": "web"},
            "eventTime": "1763916671802",
            "sequenceId": 1,
        },
        {"payload": "world"},
    ],
}
ProducerMessages = Annotated[
    dict[str, Any],
    Field(
        description=(
            "Pulsar's `ProducerMessages`: `producerName` (default `RestProducer`) and "
            "`messages`, each a `ProducerMessage` with `payload` (a string), `key`, "
            "`properties`, `eventTime` (ms, as a string) and `sequenceId`; other fields of "
            "upstream's model are accepted and ignored"
        ),
        examples=[EXAMPLE_PRODUCER_MESSAGES],
    ),
]
ProducerAcks = Annotated[
    dict[str, Any],
    Field(
        description=(
            "Pulsar's `ProducerAcks`: one result per message, in order; `messageId` is "
            "`ledgerId:entryId:partition` (-1: not partitioned), `errorCode` 0 on success, "
            "2 with `errorMsg` when that message was not stored"
        ),
        examples=[
            {
                "messagePublishResults": [
                    {"messageId": "12:0:-1", "errorCode": 0, "schemaVersion": 0},
                    {"messageId": "12:1:-1", "errorCode": 0, "schemaVersion": 0},
                ],
                "schemaVersion": 0,
            }
        ],
    ),
]
EXAMPLE_INTERNAL_STATS: dict[str, Any] = {
    "entriesAddedCounter": 2,
    "numberOfEntries": 2,
    "totalSize": 110,
    "currentLedgerEntries": 2,
    "currentLedgerSize": 110,
    "lastLedgerCreatedTimestamp": "2026-11-23T16:51:11.802Z",
    "waitingCursorsCount": 0,
    "pendingAddEntriesCount": 0,
    "lastConfirmedEntry": "12:1",
    "state": "LedgerOpened",
    "ledgers": [
        {
            "ledgerId": 12,
            "entries": 0,
            "size": 0,
            "offloaded": False,
            "underReplicated": False,
        },
    ],
    "cursors": {},
    "schemaLedgers": [],
    "compactedLedger": {
        "ledgerId": -1,
        "entries": -1,
        "size": -1,
        "offloaded": False,
        "underReplicated": False,
    },
}

PersistentTopicInternalStats = Annotated[
    dict[str, Any],
    Field(
        description=(
            "Pulsar's `PersistentTopicInternalStats`: the managed ledger's counters, state and "
            "ledgers; with `metadata=true` each ledger also carries its metadata as text and "
            "`underReplicated` (a bookie of its ensembles is not registered)"
        ),
        examples=[EXAMPLE_INTERNAL_STATS],
    ),
]
EXAMPLE_TOPIC_STATS: dict[str, Any] = {
    "msgRateIn": 0.0, "msgThroughputIn": 0.0, "msgRateOut": 0.0, "msgThroughputOut": 0.0,
    "bytesInCounter": 0, "msgInCounter": 0, "systemTopicBytesInCounter": 0,
    "bytesOutCounter": 0, "msgOutCounter": 0, "bytesOutInternalCounter": 0,
    "averageMsgSize": 0.0, "msgChunkPublished": False, "storageSize": 90, "backlogSize": 0,
    "backlogQuotaLimitSize": -1, "backlogQuotaLimitTime": -1,
    "oldestBacklogMessageAgeSeconds": -1, "publishRateLimitedTimes": 0,
    "earliestMsgPublishTimeInBacklogs": 0, "offloadedStorageSize": 0, "lastOffloadLedgerId": 0,
    "lastOffloadSuccessTimeStamp": 0, "lastOffloadFailureTimeStamp": 0, "ongoingTxnCount": 0,
    "abortedTxnCount": 0, "committedTxnCount": 0, "publishers": [], "waitingPublishers": 0,
    "subscriptions": {}, "replication": {}, "deduplicationStatus": "Disabled",
    "nonContiguousDeletedMessagesRanges": 0,
    "nonContiguousDeletedMessagesRangesSerializedSize": 0,
    "delayedMessageIndexSizeInBytes": 0,
    "compaction": {"lastCompactionRemovedEventCount": 0, "lastCompactionSucceedTimestamp": 0,
                   "lastCompactionFailedTimestamp": 0, "lastCompactionDurationTimeInMills": 0},
    "ownerBroker": "localhost:8080",
}

TopicStats = Annotated[
    dict[str, Any],
    Field(
        description=(
            "Pulsar's `TopicStatsImpl` for a topic with no binary-protocol producers or "
            "subscriptions: `storageSize` (the bytes its ledgers hold), the namespace's "
            "backlog quotas, `ownerBroker`; rates and counters 0, as the broker shows them "
            "for REST-produced messages"
        ),
        examples=[EXAMPLE_TOPIC_STATS],
    ),
]
PartitionedTopicStats = Annotated[
    dict[str, Any],
    Field(
        description=(
            "Pulsar's `PartitionedTopicStatsImpl`: the partitions' stats summed, the "
            "topic's `PartitionedTopicMetadata`, and with `perPartition=true` each "
            "partition's `TopicStatsImpl` by its name"
        ),
        examples=[{
            **{k: v for k, v in EXAMPLE_TOPIC_STATS.items()
               if k not in ("deduplicationStatus", "ownerBroker")},
            "oldestBacklogMessageAgeSeconds": 0,
            "metadata": {"partitions": 1, "deleted": False},
            "partitions": {"persistent://acme/payments/orders-partition-0": EXAMPLE_TOPIC_STATS},
        }],
    ),
]
PartitionedTopicInternalStats = Annotated[
    dict[str, Any],
    Field(
        description=(
            "Pulsar's `PartitionedTopicInternalStats`: the topic's `PartitionedTopicMetadata` "
            "and each partition's `PersistentTopicInternalStats` by its name"
        ),
        examples=[{"metadata": {"partitions": 1, "deleted": False},
                   "partitions": {"persistent://acme/payments/orders-partition-0":
                                  EXAMPLE_INTERNAL_STATS}}],
    ),
]
