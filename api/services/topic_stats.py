"""A topic's stats as the broker answers `GET .../{topic}/stats` (Pulsar's `TopicStatsImpl`) and
a partitioned topic's as it answers `.../partitioned-stats` (`PartitionedTopicStatsImpl`), field
for field in Jackson's order, pure.

What the service has to count: the bytes its managed ledger stores (`storageSize`, the
ledgers' sizes with the open one's, as `ManagedLedgerImpl.getTotalSize`) and the namespace's
backlog quotas. It has no binary-protocol producers, consumers, subscriptions, replicators,
transactions, offloading or compaction, so their figures are what a broker shows for a topic
that has none: rates and counters 0, `publishers` [], `subscriptions` {}. The broker's REST
producer counts nothing either (`msgInCounter` stays 0 after a REST produce on the 4.0.8
broker), and messages produced here are counted in `storageSize` only, as there.

The partitioned aggregate follows `TopicStatsImpl.add` over the partitions that answered
(sums, a running mean of `averageMsgSize`, the last partition's quotas); it is built by
`new PartitionedTopicStatsImpl(metadata)`, whose fields start at Java's defaults rather than at
`reset()`'s, so its `oldestBacklogMessageAgeSeconds` is 0 where a topic's is -1, and it has no
`deduplicationStatus` or `ownerBroker` (Jackson leaves nulls out).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from javaformats import hash_map_order

DESTINATION_STORAGE = "destination_storage"  # BacklogQuota.BacklogQuotaType
MESSAGE_AGE = "message_age"
NO_LIMIT = -1  # backlogQuotaDefaultLimitBytes and backlogQuotaDefaultLimitSecond, the defaults


def backlog_quota_limits(quotas: Mapping[str, Any], default_bytes: int = NO_LIMIT,
                         default_seconds: int = NO_LIMIT) -> tuple[int, int]:
    """(`backlogQuotaLimitSize`, `backlogQuotaLimitTime`): the namespace's
    `backlog_quota_map` entries for `destination_storage` (its `limitSize`, or the older
    `limit`) and `message_age` (its `limitTime`), else the broker's defaults, as
    `AbstractTopic.getBacklogQuota` resolves them with no topic-level policy."""
    size, seconds = default_bytes, default_seconds
    storage = quotas.get(DESTINATION_STORAGE)
    if isinstance(storage, Mapping):
        value = storage.get("limitSize", storage.get("limit"))
        if isinstance(value, int) and not isinstance(value, bool):
            size = value
    age = quotas.get(MESSAGE_AGE)
    if isinstance(age, Mapping):
        value = age.get("limitTime")
        if isinstance(value, int) and not isinstance(value, bool):
            seconds = value
    return size, seconds


def _stats(storage_size: int, limit_size: int, limit_time: int,
           oldest_backlog_age: int) -> dict[str, Any]:
    """`TopicStatsImpl`'s properties up to and including `replication`, in its order."""
    return {
        "msgRateIn": 0.0,
        "msgThroughputIn": 0.0,
        "msgRateOut": 0.0,
        "msgThroughputOut": 0.0,
        "bytesInCounter": 0,
        "msgInCounter": 0,
        "systemTopicBytesInCounter": 0,
        "bytesOutCounter": 0,
        "msgOutCounter": 0,
        "bytesOutInternalCounter": 0,
        "averageMsgSize": 0.0,
        "msgChunkPublished": False,
        "storageSize": storage_size,
        "backlogSize": 0,
        "backlogQuotaLimitSize": limit_size,
        "backlogQuotaLimitTime": limit_time,
        "oldestBacklogMessageAgeSeconds": oldest_backlog_age,
        "publishRateLimitedTimes": 0,
        "earliestMsgPublishTimeInBacklogs": 0,
        "offloadedStorageSize": 0,
        "lastOffloadLedgerId": 0,
        "lastOffloadSuccessTimeStamp": 0,
        "lastOffloadFailureTimeStamp": 0,
        "ongoingTxnCount": 0,
        "abortedTxnCount": 0,
        "committedTxnCount": 0,
        "publishers": [],
        "waitingPublishers": 0,
        "subscriptions": {},
        "replication": {},
    }


def _tail(stats: dict[str, Any]) -> dict[str, Any]:
    """The properties after `deduplicationStatus`, in `TopicStatsImpl`'s order."""
    stats.update({
        "nonContiguousDeletedMessagesRanges": 0,
        "nonContiguousDeletedMessagesRangesSerializedSize": 0,
        "delayedMessageIndexSizeInBytes": 0,
        "compaction": {
            "lastCompactionRemovedEventCount": 0,
            "lastCompactionSucceedTimestamp": 0,
            "lastCompactionFailedTimestamp": 0,
            "lastCompactionDurationTimeInMills": 0,
        },
    })
    return stats


def topic_stats(storage_size: int, limits: tuple[int, int], owner_broker: str) -> dict[str, Any]:
    """`PersistentTopic.asyncGetStats` of a topic with no producers or subscriptions:
    `storageSize` its managed ledger's bytes, `limits` from `backlog_quota_limits`,
    `ownerBroker` the serving broker's id (`host:webServicePort`)."""
    stats = _stats(storage_size, *limits, oldest_backlog_age=-1)
    stats["deduplicationStatus"] = "Disabled"
    _tail(stats)
    stats["ownerBroker"] = owner_broker
    return stats


def partitioned_topic_stats(metadata: dict[str, Any], partitions: list[tuple[str, dict[str, Any]]],
                            per_partition: bool) -> dict[str, Any]:
    """`PartitionedTopicStatsImpl` of `metadata` (the stored `PartitionedTopicMetadata`) and
    the stats of the partitions that answered, `(partition name, topic_stats(...))` in
    partition order; with `per_partition`, each partition's stats by name, in a Java
    `HashMap`'s order."""
    limit_size = limit_time = 0  # Java's defaults until a partition's are copied over
    storage_size = 0
    for _, stats in partitions:
        storage_size += stats["storageSize"]
        limit_size, limit_time = stats["backlogQuotaLimitSize"], stats["backlogQuotaLimitTime"]
    total = _tail(_stats(storage_size, limit_size, limit_time, oldest_backlog_age=0))
    total["metadata"] = metadata
    total["partitions"] = hash_map_order(partitions) if per_partition else {}
    return total


def empty_topic_stats() -> dict[str, Any]:
    """`new TopicStatsImpl()`: what the broker lists under the partitioned topic's own name
    when no partition answered (Java's defaults, nulls left out)."""
    return _tail(_stats(0, 0, 0, oldest_backlog_age=0))
