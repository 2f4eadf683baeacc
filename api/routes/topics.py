"""Persistent topics: Pulsar's REST producer (`/topics/persistent/...`) and the admin paths
of `admin/v2/PersistentTopics` for create, delete, list, internal stats and message reads."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query, Request, Response
from fastapi.responses import JSONResponse

from api.deps import PartitionedTopicsDep, TopicsDep
from api.errors import NotFound
from api.http.header_case import keep_case
from api.naming import INVALID_TOPIC_NAME
from api.services.partitioned_topics import (
    METADATA_MEDIA_TYPE,
    partition_count,
    partitions_with_properties,
)
from api.services.topics import (
    MESSAGE_ID_NOT_FOUND,
    NO_MESSAGES,
    ReadMessage,
)
from api.shapes.params import (
    EntryId,
    JerseyBoolean,
    LedgerId,
    NamespaceName,
    TenantName,
    TopicName,
)
from api.shapes.responses import (
    EXAMPLE_PRODUCER_MESSAGES,
    PartitionedTopicInternalStats,
    PartitionedTopicStats,
    PersistentTopicInternalStats,
    ProducerAcks,
    ProducerMessages,
    TopicNames,
    TopicStats,
)
from javaformats import parse_java_long
from metastore.models import PartitionedTopicMetadata

router = APIRouter(tags=["topics"])
ADMIN = "/admin/v2/persistent/{tenant}/{namespace}"

AUTHORITATIVE = "Accepted for compatibility (this service owns every topic)"
NAMESPACE_NOT_FOUND = "Namespace does not exist"
INVALID_NAME = "Namespace name is not valid"
TOPIC_NOT_FOUND = "Topic persistent://{tenant}/{namespace}/{topic} not found"
# The message endpoints answer the payload's bytes and the message's metadata in headers.
# The broker's PersistentTopics resource declares JSON for everything it produces, so the raw
# payload goes out labelled `application/json`, as there.
MESSAGE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": (
            "The message payload as raw bytes (labelled application/json, as the broker does); "
            "its id and metadata are in `X-Pulsar-*` headers (`X-Pulsar-Message-ID: "
            "ledgerId:entryId`, `X-Pulsar-PROPERTY` with the properties as a JSON object, "
            "`X-Pulsar-publish-time`, `X-Pulsar-producer-name`, `X-Pulsar-sequence-id`, ...)"
        ),
        "content": {
            "application/json": {
                "schema": {"type": "string", "format": "binary"},
                "example": "hello",
            }
        },
    },
}


def errors(reasons: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """`responses=` for the error statuses a route answers, each with its reason text."""
    return {status: {"description": reason} for status, reason in reasons.items()}


PRODUCE_BODY = Body(
    openapi_examples={
        "two messages": {
            "summary": "two UTF-8 messages, one keyed with properties",
            "value": EXAMPLE_PRODUCER_MESSAGES,
        }
    },
)
TOO_LARGE = ("A message (metadata and payload) is larger than maxMessageSize, or the request "
             "has more than maxMessagesPerProduceRequest messages")


def _message_response(message: ReadMessage) -> Response:
    """The payload, with the message's headers in the broker's order, a repeated one (such
    as `X-Pulsar-replicated-to`) once per value, their names in the broker's case
    (`api.http.header_case`)."""
    response = Response(content=message.payload, media_type="application/json")
    headers = [(name.encode("latin-1"), value.encode("latin-1"))
               for name, value in message.headers]
    keep_case(name for name, _ in headers)
    response.raw_headers.extend(headers)
    return response


def _id(text: str, what: str) -> int:
    """A path id as Jersey converts a `long`: 404 when `Long.parseLong` would refuse it
    (Python's `int` alone would also take `1_0` and surrounding blanks)."""
    try:
        return parse_java_long(text)
    except ValueError:
        raise NotFound(f"Invalid {what}: {text}") from None


@router.post(
    "/topics/persistent/{tenant}/{namespace}/{topic}",
    operation_id="produceOnPersistentTopic",
    summary="Produce message to a persistent topic.",
    response_model=ProducerAcks,
    responses=errors(
        {
            404: "Namespace does not exist, Namespace is deleted (being deleted), or the topic "
                 "does not exist and auto-creation is off",
            412: f"{INVALID_TOPIC_NAME}, or not enough bookies for the namespace's placement",
            413: TOO_LARGE,
        }
    ),
)
async def produce(
    tenant: TenantName,
    namespace: NamespaceName,
    topic: TopicName,
    topics: TopicsDep,
    request: Annotated[ProducerMessages, PRODUCE_BODY],
    authoritative: bool = Query(default=False, description=AUTHORITATIVE),
) -> JSONResponse:
    """Pulsar's REST producer (PIP-64). Each message's `payload` is a string encoded with
    the value schema (UTF-8 STRING by default, not base64). The answer lists one result
    per message with its id `ledgerId:entryId:partition` (partition -1: not partitioned).
    The topic is created on first produce when `allowAutoTopicCreation` is on. A message
    whose metadata and payload exceed `maxMessageSize` answers 413 and stores nothing."""
    return JSONResponse(await topics.produce(tenant, namespace, topic, request))


@router.post(
    "/topics/persistent/{tenant}/{namespace}/{topic}/partitions/{partition}",
    operation_id="produceOnPersistentTopicPartition",
    summary="Produce message to a partition of a persistent topic.",
    response_model=ProducerAcks,
    responses=errors(
        {
            400: "Topic name can't contain '-partition-' suffix.",
            404: "Namespace does not exist, or Namespace is deleted (being deleted)",
            412: INVALID_TOPIC_NAME,
            413: TOO_LARGE,
        }
    ),
)
async def produce_on_partition(
    tenant: TenantName,
    namespace: NamespaceName,
    topic: TopicName,
    partition: Annotated[int, Path(description="The partition's index, from 0",
                                   openapi_examples={"first": {"summary": "the first partition",
                                                               "value": 0}})],
    topics: TopicsDep,
    request: Annotated[ProducerMessages, PRODUCE_BODY],
    authoritative: bool = Query(default=False, description=AUTHORITATIVE),
) -> JSONResponse:
    """Every message to partition `partition` of a partitioned topic (ids
    `ledgerId:entryId:partition`); a partition the topic does not have leaves each message
    unpublished with errorCode 2, as the broker answers."""
    return JSONResponse(await topics.produce(tenant, namespace, topic, request, partition))


@router.get(
    ADMIN,
    operation_id="getList",
    summary="Get the list of topics under a namespace.",
    response_model=TopicNames,
    responses=errors({404: NAMESPACE_NOT_FOUND, 412: INVALID_NAME}),
)
async def list_topics(tenant: TenantName, namespace: NamespaceName, topics: TopicsDep) -> list[str]:
    """The namespace's persistent topics (those with a managed ledger), as
    `persistent://tenant/namespace/topic`."""
    return await topics.list(tenant, namespace)


@router.get(
    "/admin/v2/non-persistent/{tenant}/{namespace}",
    operation_id="getNonPersistentList",
    summary="Get the list of non-persistent topics under a namespace.",
    response_model=TopicNames,
    responses=errors({404: NAMESPACE_NOT_FOUND, 412: INVALID_NAME}),
)
async def list_non_persistent_topics(tenant: TenantName, namespace: NamespaceName,
                                     topics: TopicsDep) -> list[str]:
    """Always empty (the service keeps no non-persistent topics) for an existing namespace;
    Pulsar 4.0's `topics list` asks for both domains."""
    return await topics.list_non_persistent(tenant, namespace)


@router.put(
    ADMIN + "/{topic}",
    operation_id="createNonPartitionedTopic",
    summary="Create a non-partitioned topic.",
    status_code=204,
    responses=errors(
        {
            404: f"{NAMESPACE_NOT_FOUND}, or Namespace is deleted (being deleted)",
            409: "This topic already exists",
            412: f"{INVALID_TOPIC_NAME}, or not enough bookies for the namespace's placement",
        }
    ),
)
async def create_topic(
    tenant: TenantName,
    namespace: NamespaceName,
    topic: TopicName,
    topics: TopicsDep,
    authoritative: bool = Query(default=False, description=AUTHORITATIVE),
) -> Response:
    """Create the topic's managed ledger, and its first ledger placed by the namespace's
    persistence policy and bookie affinity groups."""
    await topics.create(tenant, namespace, topic)
    return Response(status_code=204)


@router.delete(
    ADMIN + "/{topic}",
    operation_id="deleteTopic",
    summary="Delete a topic.",
    status_code=204,
    responses=errors({404: TOPIC_NOT_FOUND, 412: INVALID_TOPIC_NAME}),
)
async def delete_topic(
    tenant: TenantName,
    namespace: NamespaceName,
    topic: TopicName,
    topics: TopicsDep,
    force: bool = Query(
        default=False,
        description=(
            "Accepted for compatibility (a topic has no producers or subscriptions to close here)"
        ),
    ),
    authoritative: bool = Query(default=False, description=AUTHORITATIVE),
) -> Response:
    """Delete the topic's managed ledger and its ledgers."""
    await topics.delete(tenant, namespace, topic)
    return Response(status_code=204)


STATS_OPTIONS = ("Accepted for compatibility: the service keeps no subscriptions or "
                 "producers for it to change")


def stats_options(
    authoritative: Annotated[JerseyBoolean, Query(description=AUTHORITATIVE)] = False,
    getPreciseBacklog: Annotated[JerseyBoolean, Query(description=STATS_OPTIONS)] = False,
    subscriptionBacklogSize: Annotated[JerseyBoolean, Query(description=STATS_OPTIONS)] = True,
    getEarliestTimeInBacklog: Annotated[JerseyBoolean, Query(description=STATS_OPTIONS)] = False,
    excludePublishers: Annotated[JerseyBoolean, Query(description=STATS_OPTIONS)] = False,
    excludeConsumers: Annotated[JerseyBoolean, Query(description=STATS_OPTIONS)] = False,
) -> None:
    """The query options of the broker's stats routes (`GetStatsOptions`), bound as it binds
    them and otherwise unused."""


StatsOptions = Annotated[None, Depends(stats_options)]


@router.get(
    ADMIN + "/{topic}/stats",
    operation_id="getStats",
    summary="Get the stats for the topic.",
    response_model=TopicStats,
    responses=errors({404: TOPIC_NOT_FOUND + "; or Namespace not found",
                      412: INVALID_TOPIC_NAME}),
)
async def stats(
    tenant: TenantName,
    namespace: NamespaceName,
    topic: TopicName,
    topics: TopicsDep,
    options: StatsOptions,
) -> JSONResponse:
    """Pulsar's `TopicStatsImpl`: the bytes the topic's ledgers hold (`storageSize`), the
    namespace's backlog quotas and the owner; rates and counters of binary-protocol traffic
    are 0 (the service has none, and the broker counts no REST-produced message either)."""
    return JSONResponse(await topics.stats(tenant, namespace, topic))


@router.get(
    ADMIN + "/{topic}/partitioned-stats",
    operation_id="getPartitionedStats",
    summary="Get the stats for the partitioned topic.",
    response_model=PartitionedTopicStats,
    responses=errors({404: "Partitioned Topic persistent://tenant/namespace/topic not found; "
                           "or Namespace not found",
                      412: "Partitioned Topic Name should not contain '-partition-'; or "
                           + INVALID_TOPIC_NAME}),
)
async def partitioned_stats(
    tenant: TenantName,
    namespace: NamespaceName,
    topic: TopicName,
    partitioned: PartitionedTopicsDep,
    options: StatsOptions,
    perPartition: Annotated[JerseyBoolean, Query(
        description="`true`: each partition's stats too, by its name")] = True,
) -> JSONResponse:
    """Pulsar's `PartitionedTopicStatsImpl`: the partitions' stats summed, the metadata, and
    (`perPartition`, the default) each partition's stats by name."""
    return JSONResponse(await partitioned.stats(tenant, namespace, topic, perPartition))


@router.get(
    ADMIN + "/{topic}/internalStats",
    operation_id="getInternalStats",
    summary="Get the internal stats for the topic.",
    response_model=PersistentTopicInternalStats,
    responses=errors({404: TOPIC_NOT_FOUND, 412: INVALID_TOPIC_NAME}),
)
async def internal_stats(
    tenant: TenantName,
    namespace: NamespaceName,
    topic: TopicName,
    topics: TopicsDep,
    metadata: bool = Query(
        default=False,
        description=(
            "`true`: each ledger also carries its metadata and whether it is under-replicated"
        ),
    ),
    authoritative: bool = Query(default=False, description=AUTHORITATIVE),
) -> JSONResponse:
    """The managed ledger's stats as Pulsar's `PersistentTopicInternalStats`: entry counts,
    sizes, state, last confirmed entry and its ledgers. With `metadata=true`, a ledger is
    `underReplicated` when a bookie of its ensembles is not registered."""
    return JSONResponse(await topics.internal_stats(tenant, namespace, topic, metadata))


@router.get(
    ADMIN + "/{topic}/ledger/{ledgerId}/entry/{entryId}",
    operation_id="getMessageById",
    summary="Get message by its messageId.",
    response_class=Response,
    responses={
        **MESSAGE_RESPONSES,
        **errors(
            {
                404: f"{TOPIC_NOT_FOUND}; {MESSAGE_ID_NOT_FOUND}; or an id that is not a number",
                412: INVALID_TOPIC_NAME,
            }
        ),
    },
)
async def message_by_id(
    tenant: TenantName,
    namespace: NamespaceName,
    topic: TopicName,
    ledgerId: LedgerId,
    entryId: EntryId,
    topics: TopicsDep,
    authoritative: bool = Query(default=False, description=AUTHORITATIVE),
) -> Response:
    """The message stored at `ledgerId:entryId`: its payload as the body, its metadata in
    `X-Pulsar-*` headers, as `pulsar-admin topics get-message-by-id` reads them."""
    message = await topics.message_by_id(
        tenant, namespace, topic, _id(ledgerId, "ledger id"), _id(entryId, "entry id")
    )
    return _message_response(message)


@router.get(
    ADMIN + "/{topic}/examinemessage",
    operation_id="examineMessage",
    summary="Examine a specific message on a topic by position relative to the earliest or the "
    "latest message.",
    response_class=Response,
    responses={
        **MESSAGE_RESPONSES,
        **errors(
            {
                404: f"{TOPIC_NOT_FOUND}; or no message at that position",
                412: f"{INVALID_TOPIC_NAME}; or {NO_MESSAGES}",
            }
        ),
    },
)
async def examine_message(
    tenant: TenantName,
    namespace: NamespaceName,
    topic: TopicName,
    topics: TopicsDep,
    initialPosition: str = Query(
        default="latest",
        description="`earliest` counts from the earliest message; anything else from the latest",
    ),
    messagePosition: int = Query(
        default=1,
        description="1-based position from that end (1: the latest, or earliest, message; "
        "below 1 counts as 1)",
    ),
    authoritative: bool = Query(default=False, description=AUTHORITATIVE),
) -> Response:
    """The message at `messagePosition` from the latest (or earliest) one: its payload as
    the body, its metadata in `X-Pulsar-*` headers, as `pulsar-admin topics examine-message`
    reads them."""
    message = await topics.examine(tenant, namespace, topic, initialPosition, messagePosition)
    return _message_response(message)


# -- partitioned topics (`PersistentTopics`: createPartitionedTopic, getPartitionedMetadata,
# updatePartitionedTopic, deletePartitionedTopic, getPartitionedTopicList) ------------------

COMPATIBILITY = "Accepted for compatibility"
FORCE = "Accepted for compatibility (a topic has no producers or subscriptions to close here)"
SYSTEM_TOPICS = "`true`: also the system topics (`__change_events`, ...)"
AUTO_CREATION = ("`true`: a missing topic that would be created on first use answers 0 "
                 "partitions instead of 404")
PARTITIONS_BODY = Body(
    description="The number of partitions, a JSON number (Jackson's `int`: `3`, `\"3\"`)",
    examples=[3],
)
CREATE_BODY = Body(
    description="The number of partitions, a JSON number (Jackson's `int`: `3`, `\"3\"`); "
                f"with Content-Type `{METADATA_MEDIA_TYPE}`, a `PartitionedTopicMetadata` "
                "(`partitions` and `properties`)",
    examples=[3],
)


@router.get(
    ADMIN + "/partitioned",
    operation_id="getPartitionedTopicList",
    summary="Get the list of partitioned topics under a namespace.",
    response_model=TopicNames,
    responses=errors({404: NAMESPACE_NOT_FOUND, 412: INVALID_NAME}),
)
async def list_partitioned_topics(
    tenant: TenantName,
    namespace: NamespaceName,
    partitioned: PartitionedTopicsDep,
    includeSystemTopic: Annotated[JerseyBoolean, Query(description=SYSTEM_TOPICS)] = False,
) -> list[str]:
    """The namespace's partitioned topics, sorted, as `persistent://tenant/namespace/topic`."""
    return await partitioned.list(tenant, namespace, includeSystemTopic)


@router.get(
    "/admin/v2/non-persistent/{tenant}/{namespace}/partitioned",
    operation_id="getNonPersistentPartitionedTopicList",
    summary="Get the list of non-persistent partitioned topics under a namespace.",
    response_model=TopicNames,
    responses=errors({404: NAMESPACE_NOT_FOUND, 412: INVALID_NAME}),
)
async def list_non_persistent_partitioned_topics(
    tenant: TenantName,
    namespace: NamespaceName,
    partitioned: PartitionedTopicsDep,
    includeSystemTopic: Annotated[JerseyBoolean, Query(description=SYSTEM_TOPICS)] = False,
) -> list[str]:
    """Always empty (the service keeps no non-persistent topics) for an existing namespace;
    Pulsar 4.0's `topics list-partitioned-topics` asks for both domains."""
    await partitioned.list(tenant, namespace, includeSystemTopic)  # the namespace's checks
    return []


@router.get(
    ADMIN + "/{topic}/partitioned-internalStats",
    operation_id="getPartitionedStatsInternal",
    summary="Get the internal stats of a partitioned topic's partitions.",
    response_model=PartitionedTopicInternalStats,
    responses=errors({404: "Partitioned Topic persistent://tenant/namespace/topic not found; "
                           "or Namespace not found", 412: INVALID_TOPIC_NAME}),
)
async def partitioned_internal_stats(
    tenant: TenantName,
    namespace: NamespaceName,
    topic: TopicName,
    partitioned: PartitionedTopicsDep,
    metadata: Annotated[JerseyBoolean, Query(description=(
        "`true`: each ledger also carries its metadata and whether it is under-replicated"
    ))] = False,
    authoritative: Annotated[JerseyBoolean, Query(description=AUTHORITATIVE)] = False,
) -> JSONResponse:
    """`{"metadata": {...}, "partitions": {"persistent://...-partition-i": <internal stats>}}`:
    each partition's managed ledger, as `internalStats` shows one topic."""
    return JSONResponse(await partitioned.internal_stats(tenant, namespace, topic, metadata))


@router.put(
    ADMIN + "/{topic}/partitions",
    operation_id="createPartitionedTopic",
    summary="Create a partitioned topic.",
    status_code=204,
    response_class=Response,
    responses=errors(
        {
            400: "The body is not a number; or a transaction-internal name",
            404: "Namespace not found, or Namespace is deleted (being deleted)",
            406: "Number of partitions should be more than 0 (or at most "
                 "maxNumPartitionsPerPartitionedTopic)",
            409: "This topic already exists (partitioned or not)",
            412: "Namespace name is not valid; Topic name is not valid; Partitioned Topic Name "
                 "should not contain '-partition-'",
        }
    ),
)
async def create_partitioned_topic(
    tenant: TenantName,
    namespace: NamespaceName,
    topic: TopicName,
    partitioned: PartitionedTopicsDep,
    request: Request,
    body: Annotated[Any, CREATE_BODY] = None,
    createLocalTopicOnly: Annotated[JerseyBoolean, Query(description=COMPATIBILITY)] = False,
    authoritative: Annotated[JerseyBoolean, Query(description=AUTHORITATIVE)] = False,
) -> Response:
    """Create the topic's metadata and its partitions `{topic}-partition-0..N-1`, each a topic
    whose ledgers follow the namespace's persistence policy and bookie affinity groups. The
    body is the count (`application/json`), or, as the Java client sends it with properties,
    a `PartitionedTopicMetadata` (`application/vnd.partitioned-topic-metadata+json`)."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    metadata = (partitions_with_properties(body) if media == METADATA_MEDIA_TYPE
                else partition_count(body))
    await partitioned.create(tenant, namespace, topic, metadata)
    return Response(status_code=204)


@router.get(
    ADMIN + "/{topic}/partitions",
    operation_id="getPartitionedMetadata",
    summary="Get partitioned topic metadata.",
    response_model=PartitionedTopicMetadata,
    response_model_exclude_none=True,
    responses=errors({404: f"{TOPIC_NOT_FOUND}; or Namespace not found",
                      412: INVALID_TOPIC_NAME}),
)
async def get_partitioned_metadata(
    tenant: TenantName,
    namespace: NamespaceName,
    topic: TopicName,
    partitioned: PartitionedTopicsDep,
    checkAllowAutoCreation: Annotated[JerseyBoolean, Query(description=AUTO_CREATION)] = False,
    authoritative: Annotated[JerseyBoolean, Query(description=AUTHORITATIVE)] = False,
) -> JSONResponse:
    """`{"partitions": N, "deleted": false}`; 0 partitions for a topic that is not
    partitioned (a partition included)."""
    found = await partitioned.metadata(tenant, namespace, topic, checkAllowAutoCreation)
    return JSONResponse(found.dump())


@router.post(
    ADMIN + "/{topic}/partitions",
    operation_id="updatePartitionedTopic",
    summary="Increment partitions of an existing partitioned topic.",
    status_code=204,
    response_class=Response,
    responses=errors(
        {
            400: "The body is not a number",
            409: "Topic persistent://tenant/namespace/topic is not the partitioned topic.",
            412: f"{INVALID_TOPIC_NAME}; Partitioned Topic Name should not contain "
                 "'-partition-'",
            422: "Desired partitions N can't be less than the current partitions M.",
        }
    ),
)
async def update_partitioned_topic(
    tenant: TenantName,
    namespace: NamespaceName,
    topic: TopicName,
    partitioned: PartitionedTopicsDep,
    body: Annotated[Any, PARTITIONS_BODY] = None,
    updateLocalTopicOnly: Annotated[JerseyBoolean, Query(description=COMPATIBILITY)] = False,
    force: Annotated[JerseyBoolean, Query(description=COMPATIBILITY)] = False,
    authoritative: Annotated[JerseyBoolean, Query(description=AUTHORITATIVE)] = False,
) -> Response:
    """Grow the topic to `partitions` (never fewer): the new partitions' topics are created
    with the new count, at once."""
    await partitioned.update(tenant, namespace, topic, partition_count(body))
    return Response(status_code=204)


@router.delete(
    ADMIN + "/{topic}/partitions",
    operation_id="deletePartitionedTopic",
    summary="Delete a partitioned topic.",
    status_code=204,
    response_class=Response,
    responses=errors(
        {
            404: "Topic persistent://tenant/namespace/topic not found.",
            409: "persistent://tenant/namespace/topic is a non-partitioned topic. Instead of "
                 "calling delete-partitioned-topic please call delete.",
            412: f"{INVALID_TOPIC_NAME}; Partitioned Topic Name should not contain "
                 "'-partition-'",
        }
    ),
)
async def delete_partitioned_topic(
    tenant: TenantName,
    namespace: NamespaceName,
    topic: TopicName,
    partitioned: PartitionedTopicsDep,
    force: Annotated[JerseyBoolean, Query(description=FORCE)] = False,
    deleteSchema: Annotated[JerseyBoolean, Query(description=COMPATIBILITY)] = False,
    authoritative: Annotated[JerseyBoolean, Query(description=AUTHORITATIVE)] = False,
) -> Response:
    """Delete every partition (its managed ledger and ledgers), then the topic's metadata."""
    await partitioned.delete(tenant, namespace, topic)
    return Response(status_code=204)
