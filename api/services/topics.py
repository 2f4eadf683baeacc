"""Persistent topics on the embedded storage engine: produce, create, delete, list, stats and
message reads, with Pulsar's REST shapes (`rest/TopicsBase`, `admin/v2/PersistentTopics`).

A topic is a managed ledger (`storage.managed_ledger`) named `tenant/ns/persistent/<encoded>`;
its ledgers are placed by the namespace's policy: E/Qw/Qa from the namespace's persistence
policy or the broker's `managedLedgerDefault*`, the bookie affinity group (strict included)
from its local policies, recorded on every ledger as Pulsar's EnsemblePlacementPolicyConfig.

Entries hold what a broker writes: Pulsar's message framing (magic, CRC32C, MessageMetadata,
payload; `storage.managed_ledger.message`), so the read endpoints answer the payload and the
metadata headers the Java admin client parses.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from api.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    ServiceError,
)
from api.naming import (
    PARTITION_SUFFIX,
    base_topic,
    is_transaction_internal,
    partition_index,
    partition_name,
    require_valid_namespace_name,
    require_valid_topic_name,
    topic_url,
)
from api.services.namespaces import (
    NAMESPACE_NOT_FOUND,
    NAMESPACE_NOT_OWNED,
    NamespaceService,
)
from api.services.publish_buffer import PublishBuffer
from api.services.topic_stats import NO_LIMIT, backlog_quota_limits, topic_stats
from api.settings import Settings
from javaformats import (
    format_date,
    gson_hash_map,
    hash_map_order,
    jackson_bool,
    jackson_long,
    jackson_string_field,
    jackson_token,
    java_to_string,
    parse_java_long,
    signed_long,
)
from metastore.ledger_metadata import LedgerMetadata, LedgerState
from metastore.models import LocalPolicies, Policies
from metastore.readers import namespace_placement
from metastore.repositories import Repositories
from metastore.store import MetadataStore
from placement import AffinityGroups, PlacementConfig
from storage.ledger import LedgerError, NoSuchEntry, NoSuchLedger
from storage.managed_ledger import (
    COMPRESSION_NAMES,
    COMPRESSION_NONE,
    InvalidPosition,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFactory,
    ManagedLedgerFenced,
    MessageFormatError,
    MessageMetadata,
    NamespaceNotWritable,
    Position,
    RolloverPolicy,
    codec_decode,
    codec_encode,
    decode_message,
    encode_message,
    managed_ledger_name,
    message_size,
)

T = TypeVar("T")
DEFAULT_PRODUCER_NAME = "RestProducer"
NON_PARTITIONED = -1
MESSAGE_ID_NOT_FOUND = "Message id not found"
NO_MESSAGES = "Could not examine messages due to the total message is zero"
PARTITIONS_NOT_CREATED = "Topic partitions were not yet created"
YIELD_EVERY = 500  # messages of one produce request handled between two loop turns
LOCAL_CLUSTER = "__local__"  # replicate_to of a message produced with disableReplication


def namespace_deleted() -> NotFound:
    """404 "Namespace is deleted": the namespace's policies carry Pulsar's `deleted` mark
    (`PulsarWebResource.checkLocalOrGetPeerReplicationCluster`, reached from a topic create's
    `validateGlobalNamespaceOwnershipAsync`)."""
    return NotFound("Namespace is deleted")


def topic_not_found(tenant: str, namespace: str, topic: str) -> NotFound:
    """`AdminResource.getTopicNotFoundErrorMessage`."""
    return NotFound(f"Topic {topic_url(tenant, namespace, topic)} not found")


def event_time_of(text: str) -> int:
    """`Long.parseLong` of a message's `eventTime`; its NumberFormatException's text as a
    500 otherwise, as the broker answers it."""
    try:
        return parse_java_long(text)
    except ValueError as exc:
        raise ServiceError(str(exc)) from None


def auto_create_allowed(policies: Policies, settings: Settings) -> bool:
    """Whether a topic is created on first use in a namespace of `policies`: its
    `autoTopicCreationOverride`, else the broker's `allowAutoTopicCreation`."""
    override = (policies.model_extra or {}).get("autoTopicCreationOverride")
    if isinstance(override, dict) and "allowAutoTopicCreation" in override:
        return bool(override["allowAutoTopicCreation"])
    return settings.allowAutoTopicCreation


@dataclass(frozen=True)
class ReadMessage:
    """A message read back: the payload and the headers of Pulsar's message endpoints."""

    payload: bytes
    headers: list[tuple[str, str]]  # names as the broker writes them, in its order


def header_value(text: str) -> str:
    """A header value as Jetty writes it: characters outside ISO-8859-1, CR and LF as `?`
    (other control characters too here, which HTTP does not allow in a header either)."""
    if text.isprintable() and text.isascii():
        return text
    return "".join("?" if ord(c) > 0xFF or (c < " " and c != "\t") or c == "\x7f" else c
                   for c in text)


def _long_text(value: int) -> str:
    """A uint64 field as the broker prints Java's `long` getter."""
    return str(signed_long(value))


def message_headers(position: Position, md: MessageMetadata) -> list[tuple[str, str]]:
    """The headers of the broker's `generateResponseWithEntry` (Pulsar 4.0), in its order,
    each sent only when the message has the field, as there."""
    b64 = base64.b64encode
    headers = [
        ("X-Pulsar-Message-ID", f"{position.ledger_id}:{position.entry_id}"),
        ("X-Pulsar-PROPERTY", gson_hash_map(md.properties)),
        ("X-Pulsar-publish-time", format_date(signed_long(md.publish_time))),
    ]
    if md.event_time is not None:
        headers.append(("X-Pulsar-event-time", format_date(signed_long(md.event_time))))
    if md.deliver_at_time is not None:
        headers.append(("X-Pulsar-deliver-at-time", format_date(md.deliver_at_time)))
    if md.num_messages_in_batch is not None:
        headers.append(("X-Pulsar-num-batch-message", str(md.num_messages_in_batch)))
    if md.null_value is not None:
        headers.append(("X-Pulsar-null-value", java_to_string(md.null_value)))
    if md.num_chunks_from_msg is not None:
        headers.append(("X-Pulsar-PROPERTY-TOTAL-CHUNKS", str(md.num_chunks_from_msg)))
        headers.append(("X-Pulsar-PROPERTY-CHUNK-ID", str(md.chunk_id or 0)))
    headers.append(("X-Pulsar-Is-Encrypted", java_to_string(bool(md.encryption_keys))))
    headers.append(("X-Pulsar-producer-name", md.producer_name))
    headers.append(("X-Pulsar-sequence-id", _long_text(md.sequence_id)))
    if md.replicated_from is not None:
        headers.append(("X-Pulsar-replicated-from", md.replicated_from))
    headers += [("X-Pulsar-replicated-to", cluster) for cluster in md.replicate_to]
    if md.partition_key is not None:
        headers.append(("X-Pulsar-partition-key", md.partition_key))
    if md.compression is not None:
        headers.append(("X-Pulsar-compression",
                        COMPRESSION_NAMES.get(md.compression, str(md.compression))))
    if md.uncompressed_size is not None:
        headers.append(("X-Pulsar-uncompressed-size", str(md.uncompressed_size)))
    if md.encryption_algo is not None:
        headers.append(("X-Pulsar-encryption-algo", md.encryption_algo))
    headers += [("X-Pulsar-Base64-encryption-keys", b64(keys).decode())
                for keys in md.encryption_keys]
    if md.encryption_param is not None:
        headers.append(("X-Pulsar-Base64-encryption-param", b64(md.encryption_param).decode()))
    if md.schema_version is not None:
        headers.append(("X-Pulsar-Base64-schema-version", b64(md.schema_version).decode()))
    if md.partition_key_b64_encoded is not None:
        headers.append(("X-Pulsar-partition-key-b64-encoded",
                        java_to_string(md.partition_key_b64_encoded)))
    if md.ordering_key is not None:
        headers.append(("X-Pulsar-Base64-ordering-key", b64(md.ordering_key).decode()))
    if md.marker_type is not None:
        headers.append(("X-Pulsar-marker-type", str(md.marker_type)))
    if md.txnid_least_bits is not None:
        headers.append(("X-Pulsar-txnid-least-bits", _long_text(md.txnid_least_bits)))
    if md.txnid_most_bits is not None:
        headers.append(("X-Pulsar-txnid-most-bits", _long_text(md.txnid_most_bits)))
    if md.highest_sequence_id is not None:
        headers.append(("X-Pulsar-highest-sequence-id", _long_text(md.highest_sequence_id)))
    if md.uuid is not None:
        headers.append(("X-Pulsar-uuid", md.uuid))
    if md.num_chunks_from_msg is not None:
        headers.append(("X-Pulsar-num-chunks-from-msg", str(md.num_chunks_from_msg)))
    if md.total_chunk_msg_size is not None:
        headers.append(("X-Pulsar-total-chunk-msg-size", str(md.total_chunk_msg_size)))
    if md.chunk_id is not None:
        headers.append(("X-Pulsar-chunk-id", str(md.chunk_id)))
    if md.null_partition_key is not None:
        headers.append(("X-Pulsar-null-partition-key", java_to_string(md.null_partition_key)))
    if md.txnid_least_bits is not None and md.txnid_most_bits is not None:
        headers.append(("X-Pulsar-txn-aborted", "false"))  # no transactions here
    headers.append(("X-Pulsar-txn-uncommitted", "false"))  # every entry is below the LAC
    return [(name, header_value(value)) for name, value in headers]


# Jetty's response header buffer (`HttpConfiguration.responseHeaderSize`, 8 KiB; the broker
# sets only the request side, `httpMaxRequestHeaderSize`): a response whose status line and
# headers take more is answered 500 "Response header too large" instead.
RESPONSE_HEADER_SIZE = 8192
# What precedes and follows the message's own headers in the block Jetty writes: the status
# line, `Date`, `Content-Type`, `Content-Length` and the blank line.
_FIXED_HEADER_BYTES = (len("HTTP/1.1 200 OK\r\n") + len("Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n")
                       + len("Content-Type: application/json\r\n")
                       + len("Content-Length: \r\n") + len("\r\n"))


def response_header_bytes(headers: list[tuple[str, str]], payload_size: int) -> int:
    """The size of the header block a message read is sent with, as Jetty counts it."""
    return (_FIXED_HEADER_BYTES + len(str(payload_size))
            + sum(len(name) + len(value.encode("latin-1", "replace")) + 4
                  for name, value in headers))


def check_response_headers(message: ReadMessage) -> ReadMessage:
    """A message whose key, properties or other metadata would not fit in the response
    headers is answered 500 "Response header too large", as the broker's Jetty answers it,
    with the sizes, rather than headers an HTTP client refuses (a producer may store a key or
    properties up to `maxMessageSize`, as upstream's does)."""
    size = response_header_bytes(message.headers, len(message.payload))
    if size > RESPONSE_HEADER_SIZE:
        raise ServiceError(
            f"Response header too large: the message's headers (its key, properties and "
            f"other metadata) take {size} bytes, more than the {RESPONSE_HEADER_SIZE} bytes "
            f"of the response header buffer")
    return message


class TopicService:
    def __init__(
        self,
        store: MetadataStore,
        settings: Settings,
        placement: PlacementConfig,
        factory: ManagedLedgerFactory,
    ) -> None:
        self.store = store
        self.settings = settings
        self.placement = placement
        self.factory = factory
        self.namespaces = NamespaceService(store, settings)
        self.docs = Repositories(store)
        self.publish_buffer = PublishBuffer(settings.maxMessagePublishBufferSizeInMB << 20)
        # the broker's backlog quotas where a namespace sets none (broker.conf, untyped here)
        self.quota_defaults = (_int_setting(settings.extra, "backlogQuotaDefaultLimitBytes"),
                               _int_setting(settings.extra, "backlogQuotaDefaultLimitSecond"))

    # -- configuration ------------------------------------------------------------------------

    async def _policies(self, tenant: str, namespace: str,
                        missing: str = NAMESPACE_NOT_FOUND) -> Policies:
        """The namespace's policies from the watch-fed cache (read once per request); 404
        `missing` when the namespace does not exist."""
        require_valid_namespace_name(tenant, namespace)
        found = await self.docs.policies.get_cached(tenant, namespace)
        if found is None:
            raise NotFound(missing)
        return found.value

    def config_for(self, policies: Policies, local: LocalPolicies | None) -> ManagedLedgerConfig:
        """The namespace's E/Qw/Qa and isolation groups, from its policies and local policies
        as the request read them (from the watch-fed caches)."""
        inputs = namespace_placement(policies, local, self.placement)
        request, affinity = inputs.request, inputs.affinity
        recorded = affinity
        if recorded is None and self.placement.strict_bookie_affinity_enabled:
            recorded = AffinityGroups(())  # Pulsar records "" for both group lists
        return ManagedLedgerConfig(
            ensemble_size=request.ensemble_size,
            write_quorum=request.write_quorum,
            ack_quorum=request.ack_quorum,
            affinity=affinity,
            recorded_affinity=recorded,
            rollover=RolloverPolicy.from_broker_conf(self.settings.runtime_configuration()),
        )

    async def _exists(self, name: str) -> bool:
        return await self.docs.topics.exists(name)

    async def exists(self, tenant: str, namespace: str, topic: str) -> bool:
        """Whether the topic has a managed ledger: open in this process, or stored."""
        name = managed_ledger_name(tenant, namespace, topic)
        return self.factory.get_if_open(name) is not None or await self._exists(name)

    async def _open(self, tenant: str, namespace: str, topic: str, create: bool,
                    policies: Policies | None = None) -> ManagedLedger:
        require_valid_topic_name(tenant, namespace, topic)
        if policies is None:  # a read answers with the ownership check's words
            policies = await self._policies(
                tenant, namespace, missing=NAMESPACE_NOT_FOUND if create else NAMESPACE_NOT_OWNED)
        local = await self.namespaces.load_bundles(tenant, namespace)  # the ownership check's
        config = self.config_for(policies, local)
        name = managed_ledger_name(tenant, namespace, topic)
        if not create and not await self.exists(tenant, namespace, topic):
            # the broker's `topicNotFoundReasonAsync`: a partition's name is judged by the
            # topic it would be a partition of
            base = base_topic(topic)
            if base == topic:
                raise topic_not_found(tenant, namespace, topic)
            if await self.docs.topics.partitions(tenant, namespace, codec_encode(base)):
                raise NotFound(PARTITIONS_NOT_CREATED)  # a partition of a partitioned topic
            raise NotFound(f"Partitioned Topic not found: "
                           f"{topic_url(tenant, namespace, topic)} has zero partitions")
        try:
            return await self.factory.open(name, config)
        except NamespaceNotWritable as exc:  # deleted, or being deleted, meanwhile
            if exc.deleted:
                raise namespace_deleted() from exc
            raise NotFound(NAMESPACE_NOT_FOUND) from exc
        except ManagedLedgerFenced as exc:  # the topic was deleted while it opened
            raise topic_not_found(tenant, namespace, topic) from exc

    async def _writable_policies(self, tenant: str, namespace: str) -> Policies:
        """The namespace's policies; 404 "Namespace is deleted" while the namespace is being
        deleted (Pulsar's `deleted` mark): no topic is created and nothing produced in it."""
        policies = await self._policies(tenant, namespace)
        if policies.deleted:
            raise namespace_deleted()
        return policies

    # -- admin --------------------------------------------------------------------------------

    async def create(self, tenant: str, namespace: str, topic: str) -> None:
        require_valid_namespace_name(tenant, namespace)  # `validateNamespaceName`, first
        require_valid_topic_name(tenant, namespace, topic)
        if await self.docs.policies.get_cached(tenant, namespace) is None:
            raise NotFound(NAMESPACE_NOT_OWNED)  # the broker's ownership check, first
        await self._writable_policies(tenant, namespace)
        await self._require_not_a_stray_partition(tenant, namespace, topic)
        await self.namespaces.load_bundles(tenant, namespace)  # ownership, before a conflict
        if await self._exists(managed_ledger_name(tenant, namespace, topic)) or \
                await self.docs.topics.partitions(tenant, namespace, codec_encode(topic)):
            raise Conflict("This topic already exists")  # as a topic or a partitioned one
        await self._open(tenant, namespace, topic, create=True)

    async def _require_not_a_stray_partition(self, tenant: str, namespace: str,
                                             topic: str) -> None:
        """Pulsar's `validateNonPartitionTopicName`: a name whose part after its first
        `-partition-` is all digits names a partition, creatable only below the partition count
        of the partitioned topic before it (412 otherwise)."""
        base, found, suffix = topic.partition(PARTITION_SUFFIX)
        if not found or not (suffix.isascii() and suffix.isdigit()):
            return  # no suffix of digits (a sign is not one, as the broker reads it): a name
        index = int(suffix)
        partitions = await self.docs.topics.partitions(tenant, namespace, codec_encode(base))
        if partitions == 0:
            raise PreconditionFailed(
                f'Can\'t create topic {topic} with "-partition-" followed by numeric value if '
                f"there isn't a partitioned topic {base} created.")
        if index >= partitions:
            raise PreconditionFailed(
                f'Can\'t create topic {topic} with "-partition-" followed by a number smaller '
                f"than number of partition of partitioned topic {base}")

    async def delete(self, tenant: str, namespace: str, topic: str) -> None:
        require_valid_topic_name(tenant, namespace, topic)
        if await self.docs.policies.get(tenant, namespace) is None:
            raise topic_not_found(tenant, namespace, topic)  # the broker's words here
        if await self.docs.topics.partitions(tenant, namespace, codec_encode(topic)):
            raise Conflict(f"{topic_url(tenant, namespace, topic)} is a partitioned topic, "
                           f"instead of calling delete topic, please call "
                           f"delete-partitioned-topic.")
        await self.namespaces.load_bundles(tenant, namespace)  # ownership, before existence
        if not await self.exists(tenant, namespace, topic):
            raise topic_not_found(tenant, namespace, topic)
        await self.factory.delete(managed_ledger_name(tenant, namespace, topic))

    async def list_non_persistent(self, tenant: str, namespace: str) -> list[str]:
        await self.namespaces.policies(tenant, namespace)
        return []

    async def list(self, tenant: str, namespace: str) -> list[str]:
        await self.namespaces.policies(tenant, namespace)
        names = await self.docs.topics.persistent(tenant, namespace)
        found = [topic_url(tenant, namespace, codec_decode(n)) for n in names]
        # as the broker's list: no transaction-internal topics (`isTransactionInternalName`)
        return [name for name in found if not is_transaction_internal(name)]

    async def internal_stats(self, tenant: str, namespace: str, topic: str,
                             metadata: bool) -> dict[str, Any]:
        ledger = await self._open(tenant, namespace, topic, create=False)
        stats = ledger.internal_stats()
        if metadata:
            registered = await self.docs.bookies.ids()
            for info in stats["ledgers"]:
                try:
                    md = await ledger.client.read_metadata(info["ledgerId"])
                except NoSuchLedger:
                    continue
                info["metadata"] = _metadata_text(md)
                bookies = {b for ensemble in md.ensembles.values() for b in ensemble}
                info.pop("underReplicated", None)  # after `metadata`, as Pulsar's LedgerInfo
                info["underReplicated"] = not bookies <= registered
        return stats

    async def stats(self, tenant: str, namespace: str, topic: str) -> dict[str, Any]:
        """`getStats`: the topic's `TopicStatsImpl` (`api.services.topic_stats`), its
        managed ledger opened as the broker loads a topic to answer it."""
        require_valid_topic_name(tenant, namespace, topic)
        policies = await self._policies(tenant, namespace, missing=NAMESPACE_NOT_OWNED)
        ledger = await self._open(tenant, namespace, topic, create=False, policies=policies)
        limits = backlog_quota_limits(policies.backlog_quota_map, *self.quota_defaults)
        return topic_stats(ledger.total_size, limits, self.settings.broker_id)

    # -- messages -----------------------------------------------------------------------------

    async def produce(self, tenant: str, namespace: str, topic: str,
                      request: dict[str, Any], partition: int | None = None) -> dict[str, Any]:
        """`TopicsBase.publishMessages` (and, with `partition`, `publishMessagesToPartition`:
        every message to that partition of a partitioned topic). Into a namespace being
        deleted the topic's lookup fails with 404 "Namespace is deleted" and the producer
        answers that 404: Pulsar's producer wraps it in a 500 ("Fail to publish message:
        ..."), a server fault for what is an expected refusal, so here the check's own status
        is kept (README, "Deletes")."""
        require_valid_topic_name(tenant, namespace, topic)
        if partition is not None and partition_index(topic) != -1:
            raise InvalidInput("Topic name can't contain '-partition-' suffix.")
        policies = await self._writable_policies(tenant, namespace)
        messages = request.get("messages") or []
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise InvalidInput("messages must be a list of ProducerMessage objects")
        most = self.settings.maxMessagesPerProduceRequest
        if len(messages) > most:
            raise PayloadTooLarge(f"A request of {len(messages)} messages exceeds the maximum "
                                  f"of {most} (maxMessagesPerProduceRequest)")
        producer = bind_string(request.get("producerName"), "producerName") or (
            DEFAULT_PRODUCER_NAME)
        limit = self.settings.maxMessageSize
        now = int(time.time() * 1000)
        encoded: list[bytes] = []
        for index, message in enumerate(messages):
            if index and not index % YIELD_EVERY:
                await asyncio.sleep(0)  # a large request does not hold the loop
            payload = (bind_string(message.get("payload"), "payload") or "").encode()
            if len(payload) > limit:  # refused before its metadata is built
                raise message_too_large(index, len(payload), limit)
            entry = encode_message(_metadata_of(message, producer, now, len(payload)), payload)
            if message_size(entry) > limit:
                raise message_too_large(index, message_size(entry), limit)
            encoded.append(entry)
        # A partitioned topic's messages go to its partitions in turn (message i to partition
        # i mod N), each partition a topic of its own, as the broker's REST producer spreads
        # them over the partitions it owns (here, all of them).
        partitions = await self.docs.topics.partitions(tenant, namespace, codec_encode(topic))
        if partition is not None:
            if not 0 <= partition < partitions:  # the broker owns no such partition
                return {"messagePublishResults": [_not_owned(partition) for _ in encoded],
                        "schemaVersion": 0}
            targets = [(partition_name(topic, partition), partition)]
        elif partitions > 0:
            targets = [(partition_name(topic, index), index)
                       for index in range(min(partitions, len(encoded)))]
        else:
            if not await self.exists(tenant, namespace, topic):
                if not auto_create_allowed(policies, self.settings):
                    raise NotFound("Topic not exist")
                if not encoded or not await self._creatable(tenant, namespace, topic):
                    # nothing to publish, or a partition's name outside a partitioned topic:
                    # the broker makes no topic (its 500 "Fail to publish message: Topic ...
                    # not found"; here the lookup's own 404, README "Compatibility")
                    raise topic_not_found(tenant, namespace, topic)
            targets = [(topic, NON_PARTITIONED)]
        ledgers = [await self._open(tenant, namespace, target, create=True, policies=policies)
                   for target, _ in targets]
        async with self.publish_buffer.room(sum(map(len, encoded))):
            # all adds of the request in flight at once (started a piece at a time, so that
            # a large request does not hold the loop); each managed ledger keeps call order
            adds: list[asyncio.Future[Position]] = []
            for first in range(0, len(encoded), YIELD_EVERY):
                adds += [asyncio.ensure_future(ledgers[index % len(ledgers)].add_entry(entry))
                         for index, entry in enumerate(encoded[first:first + YIELD_EVERY],
                                                       start=first)]
                await asyncio.sleep(0)
            outcomes = await asyncio.gather(*adds, return_exceptions=True)
        results = []
        for index, outcome in enumerate(outcomes):
            partition = targets[index % len(targets)][1]
            if isinstance(outcome, LedgerError | ManagedLedgerError):
                # ProducerAck's field order; errorMsg is the failure's message
                results.append({"errorMsg": str(outcome), "messageId": str(partition),
                                "errorCode": 2, "schemaVersion": 0})
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                results.append({
                    "messageId": f"{outcome.ledger_id}:{outcome.entry_id}:{partition}",
                    "errorCode": 0,
                    "schemaVersion": 0,
                })
        return {"messagePublishResults": results, "schemaVersion": 0}

    async def _creatable(self, tenant: str, namespace: str, topic: str) -> bool:
        """Whether producing may create `topic`: any name but a partition's
        (`<name>-partition-<i>`) beyond the partitions of a partitioned topic `<name>`."""
        index = partition_index(topic)
        if index == -1:
            return True
        base = codec_encode(base_topic(topic))
        return index < await self.docs.topics.partitions(tenant, namespace, base)

    async def _read(self, ledger: ManagedLedger, position: Position) -> ReadMessage:
        try:
            entry = await ledger.read_entry(position)
        except InvalidPosition as exc:  # a ledger that is not the topic's (upstream #21919)
            raise NotFound(MESSAGE_ID_NOT_FOUND) from exc
        except NoSuchEntry as exc:
            raise NotFound(f"Message id {position} not found: {exc}") from exc
        try:
            message = decode_message(entry)
        except MessageFormatError:
            return ReadMessage(entry, [
                ("X-Pulsar-Message-ID", f"{position.ledger_id}:{position.entry_id}")])
        return check_response_headers(
            ReadMessage(message.payload, message_headers(position, message.metadata)))

    async def message_by_id(self, tenant: str, namespace: str, topic: str, ledger_id: int,
                            entry_id: int) -> ReadMessage:
        ledger = await self._open(tenant, namespace, topic, create=False)
        return await self._read(ledger, Position(ledger_id, entry_id))

    async def examine(self, tenant: str, namespace: str, topic: str, initial_position: str,
                      message_position: int) -> ReadMessage:
        """`internalExamineMessageAsync`: a position below 1 counts as 1, and any initial
        position but `earliest` counts from the latest message."""
        ledger = await self._open(tenant, namespace, topic, create=False)
        if ledger.number_of_entries <= 0:
            raise PreconditionFailed(NO_MESSAGES)
        try:
            position = ledger.nth_position(max(message_position, 1),
                                           initial_position != "earliest")
        except NoSuchEntry as exc:
            raise NotFound(
                f"Could not examine messages due to the total message count is "
                f"{ledger.number_of_entries}") from exc
        return await self._read(ledger, position)


def _int_setting(conf: Mapping[str, str], key: str) -> int:
    """A broker.conf integer the service does not type (-1, no limit, when unset or not one)."""
    try:
        return int(conf.get(key, NO_LIMIT))
    except ValueError:
        return NO_LIMIT


def _not_owned(partition: int) -> dict[str, Any]:
    """A message the broker leaves unpublished when no broker owns the partition asked for
    (one outside the topic's partitions): its `ProducerAck`, in the broker's words."""
    return {"errorMsg": "org.apache.pulsar.broker.service.BrokerServiceException$"
                        "TopicNotFoundException: Topic not owned by current broker.",
            "messageId": str(partition), "errorCode": 2, "schemaVersion": 0}


def message_too_large(index: int, size: int, limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"Message {index} of {size} bytes (metadata and payload) exceeds the maximum allowed "
        f"message size of {limit} bytes (maxMessageSize)")


def bind_string(value: object, name: str) -> str | None:
    """A `String` field as Jackson binds it (`javaformats.jackson_string_field`): scalars are
    taken as their JSON text, an object or array is a 400."""
    return _bound(jackson_string_field, value, name)


def bind_long(value: object, name: str) -> int:
    """A `long` field as Jackson binds it (`javaformats.jackson_long`); a 400 otherwise."""
    return _bound(jackson_long, value, name)


def bind_bool(value: object, name: str) -> bool:
    """A `boolean` field as Jackson binds it (`javaformats.jackson_bool`); a 400 otherwise."""
    return _bound(jackson_bool, value, name)


def _bound(convert: Callable[[object], T], value: object, name: str) -> T:
    """`convert(value)`, or a 400 with Jackson's words for the refusal and the field's name."""
    try:
        return convert(value)
    except ValueError as exc:
        raise InvalidInput(f"{exc} (field `{name}`)") from None


def _string_map(value: object, name: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"Cannot deserialize value of type `java.util.Map` from "
                           f"{jackson_token(value)} (field `{name}`)")
    out = {}
    for key, item in value.items():
        text = bind_string(item, f"{name}.{key}")
        if text is None:
            raise InvalidInput(f"A null value for `{name}.{key}`: properties are strings")
        out[str(key)] = text
    return out


def _string_list(value: object, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidInput(f"Cannot deserialize value of type `java.util.List` from "
                           f"{jackson_token(value)} (field `{name}`)")
    return tuple(bind_string(item, name) or "" for item in value)


def _metadata_of(message: dict[str, Any], producer: str, now: int,
                 size: int) -> MessageMetadata:
    """A ProducerMessage's metadata as `TopicsBase.buildMessage` and `messageToByteBuf` set
    it (the key is plain text: this service has no key-value schema); its fields bound as
    Jackson binds them, a field of the wrong type a 400."""
    properties = _string_map(message.get("properties"), "properties")
    key = bind_string(message.get("key"), "key")
    raw_event_time = bind_string(message.get("eventTime"), "eventTime")
    event_time = None
    if raw_event_time is not None and raw_event_time != "":
        event_time = event_time_of(raw_event_time)
    replicate_to = _string_list(message.get("replicationClusters"), "replicationClusters")
    if bind_bool(message.get("disableReplication"), "disableReplication"):
        replicate_to = (LOCAL_CLUSTER,)
    deliver_at = bind_long(message.get("deliverAt"), "deliverAt")
    deliver_after = bind_long(message.get("deliverAfterMs"), "deliverAfterMs")
    deliver_at_time = None
    if deliver_at and event_time is not None:
        deliver_at_time = deliver_at
    elif deliver_after:
        deliver_at_time = (event_time or 0) + deliver_after
    return MessageMetadata(
        producer_name=producer,
        sequence_id=bind_long(message.get("sequenceId"), "sequenceId") & ((1 << 64) - 1),
        publish_time=now,
        properties=properties,
        partition_key=key,
        partition_key_b64_encoded=None if key is None else False,
        event_time=None if event_time is None else event_time & ((1 << 64) - 1),
        replicate_to=replicate_to,
        deliver_at_time=deliver_at_time,
        compression=COMPRESSION_NONE,
        uncompressed_size=size,
    )


def _metadata_text(md: LedgerMetadata) -> str:
    """`LedgerMetadataImpl.toSafeString()`, as the broker puts it in internal stats: Guava's
    `toStringHelper`, the password never shown, custom metadata values in base64 in HashMap
    order (`Collectors.toMap`)."""
    parts = [f"formatVersion={md.format_version}", f"ensembleSize={md.ensemble_size}",
             f"writeQuorumSize={md.write_quorum_size}", f"ackQuorumSize={md.ack_quorum_size}",
             f"state={md.state.name}"]
    if md.state == LedgerState.CLOSED:
        parts += [f"length={md.length}", f"lastEntryId={md.last_entry_id}"]
    if md.password is not None:
        digest = "null" if md.digest_type is None else md.digest_type.name
        parts += [f"digestType={digest}", "password=OMITTED"]
    ensembles = ", ".join(f"{first}=[{', '.join(bookies)}]"
                          for first, bookies in md.ensembles.items())
    custom = hash_map_order((key, "base64:" + base64.b64encode(value).decode())
                           for key, value in md.custom_metadata.items())
    parts += ["ensembles={" + ensembles + "}",
              "customMetadata={" + ", ".join(f"{k}={v}" for k, v in custom.items()) + "}"]
    return "LedgerMetadata{" + ", ".join(parts) + "}"
