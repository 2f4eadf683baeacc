"""Persistent partitioned topics, as `admin/v2/PersistentTopics` serves them (Pulsar 4.0).

A partitioned topic `p` is its `PartitionedTopicMetadata` at
`/admin/partitioned-topics/{tenant}/{ns}/persistent/{p}` (`{"partitions":N,"deleted":false}`)
and N topics of its own, `p-partition-0` .. `p-partition-{N-1}`, each a managed ledger like
any topic: its ledgers follow the namespace's persistence policy and bookie affinity groups.
As the broker does, creating one writes the metadata and an empty managed-ledger record for
every partition that has none (here in one transaction), so the partitions are listed at once
and their first ledger is made when something is produced; growing it writes the new
partitions' records and the new count together; deleting it deletes every partition's
managed ledger with its ledgers, then the metadata.

The checks run in the broker's order, with its words: the namespace name (412), the
namespace (404 `Namespace not found`), a `-partition-` name (412), a transaction-internal
name (400), the count (406 at most 0 or over `maxNumPartitionsPerPartitionedTopic`), then
whether the topic exists, partitioned or not (409).
"""

from __future__ import annotations

import contextlib
from typing import Any

from pydantic import ValidationError

from api.errors import (
    Conflict,
    InvalidInput,
    NotAcceptable,
    NotFound,
    PreconditionFailed,
    UnprocessableEntity,
    validation_reason,
)
from api.naming import (
    PARTITION_SUFFIX,
    PARTITIONED_NAME,
    is_system_topic,
    is_transaction_internal,
    partition_index,
    partition_name,
    require_valid_namespace_name,
    require_valid_topic_name,
    topic_url,
)
from api.services.namespaces import NAMESPACE_NOT_FOUND, NAMESPACE_NOT_OWNED
from api.services.topic_stats import empty_topic_stats, partitioned_topic_stats
from api.services.topics import TopicService, auto_create_allowed, topic_not_found
from api.settings import Settings
from javaformats import hash_map_order, jackson_integer
from metastore.errors import BadVersion
from metastore.errors import NotFound as MissingKey
from metastore.models import PartitionedTopicMetadata
from metastore.repositories import Repositories, Transaction
from metastore.store import Guard, MetadataStore
from storage.managed_ledger import (
    ManagedLedgerFactory,
    codec_decode,
    codec_encode,
    managed_ledger_name,
    managed_ledger_path,
)

SYSTEM_TOPIC_FORMAT = "Cannot create topic in system topic format!"
TOPIC_EXISTS = "This topic already exists"
NOT_MORE_THAN_ZERO = "Number of partitions should be more than 0"
EMPTY_BODY = "The request entity cannot be empty."

# What the Java admin client sends when the topic is created with properties.
METADATA_MEDIA_TYPE = "application/vnd.partitioned-topic-metadata+json"


def partition_count(body: Any) -> PartitionedTopicMetadata | None:
    """A request body holding the count, bound as Jackson binds an `int` (`"3"` and `3.7`
    are 3; a boolean, array or object is refused with Jackson's words); None for no body."""
    if body is None:
        return None
    try:
        return PartitionedTopicMetadata(partitions=jackson_integer(body, "int"))
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def partitions_with_properties(body: Any) -> PartitionedTopicMetadata | None:
    """A `PartitionedTopicMetadata` body (count and properties); None for no body."""
    if body is None:
        return None
    try:
        found = PartitionedTopicMetadata.model_validate(body)
    except ValidationError as exc:
        raise InvalidInput(validation_reason(exc.errors())) from None
    return PartitionedTopicMetadata(partitions=found.partitions, properties=found.properties)


class PartitionedTopicService:
    def __init__(self, store: MetadataStore, settings: Settings,
                 factory: ManagedLedgerFactory, topics: TopicService) -> None:
        self.store = store
        self.settings = settings
        self.factory = factory
        self.topics = topics
        self.docs = Repositories(store)

    async def _metadata(self, tenant: str, namespace: str,
                        topic: str) -> PartitionedTopicMetadata | None:
        found = await self.docs.partitioned_topics.get(tenant, namespace, codec_encode(topic))
        return None if found is None else found.value

    # -- reads --------------------------------------------------------------------------------

    async def list(self, tenant: str, namespace: str, include_system: bool) -> list[str]:
        """`getPartitionedTopicList`: the namespace's partitioned topics, sorted, the system
        ones (`is_system_topic`) only with `include_system`."""
        require_valid_namespace_name(tenant, namespace)
        if await self.docs.policies.get_cached(tenant, namespace) is None:
            raise NotFound(NAMESPACE_NOT_FOUND)
        names = [codec_decode(n)
                 for n in await self.docs.partitioned_topics.names(tenant, namespace)]
        return sorted(topic_url(tenant, namespace, n) for n in names
                      if include_system or not is_system_topic(tenant, namespace, n))

    async def metadata(self, tenant: str, namespace: str, topic: str,
                       check_allow_auto_creation: bool) -> PartitionedTopicMetadata:
        """`getPartitionedMetadata`: a partitioned topic's metadata; a topic that is not
        partitioned (a partition included) has 0 partitions; a missing one is 404, or 0
        partitions with `checkAllowAutoCreation` when topics are created on first use."""
        require_valid_topic_name(tenant, namespace, topic)
        policies = await self.docs.policies.get_cached(tenant, namespace)
        if policies is None:
            raise NotFound(NAMESPACE_NOT_OWNED)
        found = await self._metadata(tenant, namespace, topic)
        if found is not None:
            return found
        if await self.topics.exists(tenant, namespace, topic):
            return PartitionedTopicMetadata()
        if check_allow_auto_creation and partition_index(topic) == -1 \
                and auto_create_allowed(policies.value, self.settings):
            return PartitionedTopicMetadata()
        raise topic_not_found(tenant, namespace, topic)

    async def _existing(self, tenant: str, namespace: str, topic: str
                        ) -> PartitionedTopicMetadata:
        """The metadata of a partitioned topic the stats read: 404 `Namespace not found`, or
        `Partitioned Topic ... not found` when the topic has no partitions."""
        require_valid_topic_name(tenant, namespace, topic)
        if await self.docs.policies.get_cached(tenant, namespace) is None:
            raise NotFound(NAMESPACE_NOT_OWNED)
        found = await self._metadata(tenant, namespace, topic)
        if found is None or found.partitions <= 0:
            raise NotFound(f"Partitioned Topic {topic_url(tenant, namespace, topic)} not found")
        await self.topics.namespaces.load_bundles(tenant, namespace)  # the partitions' owner
        return found

    async def internal_stats(self, tenant: str, namespace: str, topic: str,
                             metadata: bool) -> dict[str, Any]:
        """`getPartitionedStatsInternal`: the metadata, and each partition's internal stats
        (as `getInternalStats` answers them) by its name, in a Java `HashMap`'s order; a
        partition whose managed ledger is gone is left out, as the broker leaves it."""
        found = await self._existing(tenant, namespace, topic)
        partitions: list[tuple[str, dict[str, Any]]] = []
        for index in range(found.partitions):
            partition = partition_name(topic, index)
            if await self.topics.exists(tenant, namespace, partition):
                with contextlib.suppress(NotFound):  # deleted meanwhile: left out
                    partitions.append((topic_url(tenant, namespace, partition),
                                       await self.topics.internal_stats(
                                           tenant, namespace, partition, metadata)))
        return {"metadata": found.dump(), "partitions": hash_map_order(partitions)}

    async def stats(self, tenant: str, namespace: str, topic: str,
                    per_partition: bool) -> dict[str, Any]:
        """`getPartitionedStats`: the partitions' stats summed (`TopicStatsImpl.add`), and with
        `per_partition` each partition's by name. A partition that cannot answer (its
        managed ledger gone) is left out; when none answered with `per_partition`, the
        topic's own name is listed with empty stats, as the broker lists it."""
        require_valid_topic_name(tenant, namespace, topic)
        if partition_index(topic) != -1:
            raise PreconditionFailed(PARTITIONED_NAME)
        found = await self._existing(tenant, namespace, topic)
        partitions: list[tuple[str, dict[str, Any]]] = []
        for index in range(found.partitions):
            partition = partition_name(topic, index)
            with contextlib.suppress(NotFound):  # no managed ledger: left out
                partitions.append((topic_url(tenant, namespace, partition),
                                   await self.topics.stats(tenant, namespace, partition)))
        stats = partitioned_topic_stats(found.dump(), partitions, per_partition)
        if per_partition and not partitions:
            stats["partitions"] = {topic_url(tenant, namespace, topic): empty_topic_stats()}
        return stats

    # -- writes -------------------------------------------------------------------------------

    def _require_count(self, partitions: int) -> None:
        if partitions <= 0:
            raise NotAcceptable(NOT_MORE_THAN_ZERO)
        most = self.settings.maxNumPartitionsPerPartitionedTopic
        if most > 0 and partitions > most:
            raise NotAcceptable(
                f"Number of partitions should be less than or equal to {most}")

    async def create(self, tenant: str, namespace: str, topic: str,
                     requested: PartitionedTopicMetadata | None) -> None:
        """`createPartitionedTopic`: the metadata (the count, and properties when given) and
        every partition's managed-ledger record, in one transaction."""
        if requested is None:
            raise InvalidInput(EMPTY_BODY)
        partitions = requested.partitions
        require_valid_namespace_name(tenant, namespace)
        require_valid_topic_name(tenant, namespace, topic)
        policies = await self.docs.policies.get_cached(tenant, namespace)
        if policies is None:
            raise NotFound(NAMESPACE_NOT_OWNED)
        if PARTITION_SUFFIX in topic:  # `validatePartitionedTopicName`: contains
            raise PreconditionFailed(PARTITIONED_NAME)
        if is_transaction_internal(topic_url(tenant, namespace, topic)):
            raise InvalidInput(SYSTEM_TOPIC_FORMAT)
        self._require_count(partitions)
        if policies.value.deleted:
            raise NotFound("Namespace is deleted")
        encoded = codec_encode(topic)
        if await self._metadata(tenant, namespace, topic) is not None \
                or await self.topics.exists(tenant, namespace, topic):
            raise Conflict(TOPIC_EXISTS)
        transaction = self.docs.transaction()
        transaction.require(self.docs.partitioned_topics.at(tenant, namespace, encoded,
                                                            version=0))
        await self._add_partitions(transaction, tenant, namespace, topic, 0, partitions)
        transaction.put(self.docs.partitioned_topics, tenant, namespace, encoded,
                        value=requested)
        try:
            await transaction.commit()
        except BadVersion:  # created meanwhile, by another writer
            raise Conflict(TOPIC_EXISTS) from None

    async def _add_partitions(self, transaction: Transaction, tenant: str, namespace: str,
                              topic: str, first: int, count: int) -> None:
        """Put an empty managed-ledger record (as `MetaStoreImpl` creates one) for each
        partition in [first, count) that has none, each guarded as still absent."""
        for index in range(first, count):
            path = managed_ledger_path(
                managed_ledger_name(tenant, namespace, partition_name(topic, index)))
            if not await self.store.exists(path):
                transaction.require(Guard(path, 0))
                transaction.put_record(path, b"")

    async def update(self, tenant: str, namespace: str, topic: str,
                     requested: PartitionedTopicMetadata | None) -> None:
        """`updatePartitionedTopic`: more partitions (never fewer): the new partitions'
        records and the new count in one transaction, guarded by the metadata's version."""
        if requested is None:
            raise InvalidInput(EMPTY_BODY)
        partitions = requested.partitions
        require_valid_topic_name(tenant, namespace, topic)
        if partition_index(topic) != -1:  # `TopicName.isPartitioned`
            raise PreconditionFailed(PARTITIONED_NAME)
        encoded = codec_encode(topic)
        while True:
            found = await self.docs.partitioned_topics.get(tenant, namespace, encoded)
            current = 0 if found is None else found.value.partitions
            if current <= 0:
                raise Conflict(
                    f"Topic {topic_url(tenant, namespace, topic)} is not the partitioned topic.")
            if partitions < current:
                raise UnprocessableEntity(f"Desired partitions {partitions} can't be less than "
                                          f"the current partitions {current}.")
            most = self.settings.maxNumPartitionsPerPartitionedTopic
            if most > 0 and partitions > most:
                raise UnprocessableEntity(f"Desired partitions {partitions} can't be greater "
                                          f"than the maximum partitions per topic {most}.")
            await self.topics.namespaces.load_bundles(tenant, namespace)  # the partitions'
            if partitions == current:
                return
            assert found is not None
            updated = found.value.model_copy(update={"partitions": partitions})
            transaction = self.docs.transaction()
            transaction.require(self.docs.partitioned_topics.at(tenant, namespace, encoded,
                                                                version=found.version))
            await self._add_partitions(transaction, tenant, namespace, topic, current,
                                       partitions)
            transaction.put(self.docs.partitioned_topics, tenant, namespace, encoded,
                            value=updated)
            try:
                await transaction.commit()
                return
            except BadVersion:
                continue  # changed meanwhile: read it again

    async def delete(self, tenant: str, namespace: str, topic: str) -> None:
        """`deletePartitionedTopic`: every partition's managed ledger (with its ledgers),
        then the metadata."""
        require_valid_topic_name(tenant, namespace, topic)
        if partition_index(topic) != -1:  # `TopicName.isPartitioned`
            raise PreconditionFailed(PARTITIONED_NAME)
        await self.topics.namespaces.load_bundles(tenant, namespace)  # ownership, first
        found = await self._metadata(tenant, namespace, topic)
        if found is None or found.partitions <= 0:
            if await self.topics.exists(tenant, namespace, topic):
                raise Conflict(f"{topic_url(tenant, namespace, topic)} is a non-partitioned "
                               f"topic. Instead of calling delete-partitioned-topic please "
                               f"call delete.")
            raise NotFound(f"Topic {topic_url(tenant, namespace, topic)} not found.")
        for index in range(found.partitions):
            partition = partition_name(topic, index)
            if await self.topics.exists(tenant, namespace, partition):
                await self.factory.delete(managed_ledger_name(tenant, namespace, partition))
        with contextlib.suppress(MissingKey):  # deleted meanwhile by another caller
            await self.docs.partitioned_topics.delete(tenant, namespace, codec_encode(topic))
