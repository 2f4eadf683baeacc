"""Persistent topics: Pulsar's REST producer (`/topics/persistent/...`) and the admin paths
of `admin/v2/PersistentTopics` for create, delete, list, internal stats and message reads."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Query, Response
from fastapi.responses import JSONResponse

from api.deps import TopicsDep
from api.errors import NotFound
from api.services.topics import ReadMessage

router = APIRouter(tags=["topics"])
ADMIN = "/admin/v2/persistent/{tenant}/{namespace}"


def _message_response(message: ReadMessage) -> Response:
    return Response(content=message.payload, media_type="application/octet-stream",
                    headers=message.headers)


def _id(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise NotFound(f"Invalid {what}: {text}") from None


@router.post(
    "/topics/persistent/{tenant}/{namespace}/{topic}",
    operation_id="produceOnPersistentTopic",
    summary="Produce message to a persistent topic.",
    description=(
        "Pulsar's REST producer (PIP-64). Each message's `payload` is a string encoded with "
        "the value schema (UTF-8 STRING by default, not base64). The answer lists one result "
        "per message with its id `ledgerId:entryId:partition` (partition -1: not partitioned). "
        "The topic is created on first produce when `allowAutoTopicCreation` is on. A payload "
        "over `maxMessageSize` answers 413 and stores nothing."
    ),
    responses={404: {"description": "Tenant, namespace or topic does not exist"},
               413: {"description": "A message is larger than maxMessageSize"}},
)
async def produce(
    tenant: str, namespace: str, topic: str, topics: TopicsDep,
    request: dict[str, Any] = Body(...),
    authoritative: bool = Query(default=False, description="Accepted for compatibility"),
) -> JSONResponse:
    return JSONResponse(await topics.produce(tenant, namespace, topic, request))


@router.get(ADMIN, operation_id="getList", summary="Get the list of topics under a namespace.")
async def list_topics(tenant: str, namespace: str, topics: TopicsDep) -> list[str]:
    return await topics.list(tenant, namespace)


@router.put(ADMIN + "/{topic}", operation_id="createNonPartitionedTopic",
            summary="Create a non-partitioned topic.", status_code=204,
            responses={409: {"description": "Topic already exists"}})
async def create_topic(tenant: str, namespace: str, topic: str, topics: TopicsDep,
                       authoritative: bool = Query(default=False)) -> Response:
    await topics.create(tenant, namespace, topic)
    return Response(status_code=204)


@router.delete(ADMIN + "/{topic}", operation_id="deleteTopic", summary="Delete a topic.",
               status_code=204, responses={404: {"description": "Topic does not exist"}})
async def delete_topic(tenant: str, namespace: str, topic: str, topics: TopicsDep,
                       force: bool = Query(default=False),
                       authoritative: bool = Query(default=False)) -> Response:
    await topics.delete(tenant, namespace, topic)
    return Response(status_code=204)


@router.get(ADMIN + "/{topic}/internalStats", operation_id="getInternalStats",
            summary="Get the internal stats for the topic.")
async def internal_stats(tenant: str, namespace: str, topic: str, topics: TopicsDep,
                         metadata: bool = Query(default=False),
                         authoritative: bool = Query(default=False)) -> JSONResponse:
    return JSONResponse(await topics.internal_stats(tenant, namespace, topic, metadata))


@router.get(ADMIN + "/{topic}/ledger/{ledgerId}/entry/{entryId}",
            operation_id="getMessageById", summary="Get message by its messageId.",
            response_class=Response)
async def message_by_id(tenant: str, namespace: str, topic: str, ledgerId: str,
                        entryId: str, topics: TopicsDep,
                        authoritative: bool = Query(default=False)) -> Response:
    message = await topics.message_by_id(tenant, namespace, topic, _id(ledgerId, "ledger id"),
                                         _id(entryId, "entry id"))
    return _message_response(message)


@router.get(ADMIN + "/{topic}/examinemessage", operation_id="examineMessage",
            summary="Examine a specific message on a topic by position relative to the "
                    "earliest or the latest message.", response_class=Response)
async def examine_message(tenant: str, namespace: str, topic: str, topics: TopicsDep,
                          initialPosition: str = Query(default="latest"),
                          messagePosition: int = Query(default=1),
                          authoritative: bool = Query(default=False)) -> Response:
    message = await topics.examine(tenant, namespace, topic, initialPosition, messagePosition)
    return _message_response(message)
