"""Upstream paths: topic lookup (`/lookup/v2/topic/...`) and namespace unload."""

from __future__ import annotations

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from api.deps import LookupDep
from api.shapes.params import NamespaceName, TenantName, TopicDomain, TopicName

router = APIRouter()


class LookupData(BaseModel):
    """Pulsar's LookupData as its Jackson writes it (null fields omitted)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "brokerUrl": "pulsar://broker-1.example.com:6650",
                    "httpUrl": "http://broker-1.example.com:8080",
                    "nativeUrl": "pulsar://broker-1.example.com:6650",
                    "brokerUrlSsl": "",
                }
            ]
        }
    )

    brokerUrl: str | None = None
    brokerUrlTls: str | None = None
    httpUrl: str | None = None
    httpUrlTls: str | None = None
    nativeUrl: str | None = None
    brokerUrlSsl: str = ""


@router.get(
    "/lookup/v2/topic/{topic_domain}/{tenant}/{namespace}/{topic}",
    operation_id="lookupTopicAsync",
    tags=["topics"],
    summary="Get the owner broker of the given topic.",
    description=(
        "Answers the broker that owns the topic's namespace bundle (crc32 of the full topic "
        "name over the namespace's bundle boundaries). On the first lookup of a bundle a broker "
        "is chosen among the registered ones (namespace isolation policies, anti-affinity "
        "groups across failure domains when `failureDomainsEnabled`, fewest bundles of the "
        "namespace, least loaded) and recorded at `/namespace/{tenant}/{namespace}/{range}`; "
        "concurrent first lookups agree on one owner. This service never redirects: it always "
        "answers the owner's URLs."
    ),
    response_model=None,
    responses={
        200: {"model": LookupData},
        400: {"description": "Invalid topic domain"},
        404: {"description": "Namespace does not exist"},
        503: {"description": "No broker was available to own <topic>"},
    },
)
async def lookup_topic(
    topic_domain: TopicDomain,
    tenant: TenantName,
    namespace: NamespaceName,
    topic: TopicName,
    lookup: LookupDep,
    authoritative: bool = Query(default=False, description="Accepted for compatibility"),
    listenerName: str | None = Query(default=None, description="Accepted for compatibility"),
) -> JSONResponse:
    return JSONResponse(await lookup.lookup(topic_domain, tenant, namespace, topic))


@router.put(
    "/admin/v2/namespaces/{tenant}/{namespace}/unload",
    operation_id="unloadNamespace",
    tags=["namespaces"],
    summary="Unload namespace",
    description=(
        "Unload an active namespace from the current serving broker. Every bundle's ownership "
        "record is released; the next lookup assigns the bundle again."
    ),
    status_code=204,
    responses={404: {"description": "Namespace does not exist"}},
)
async def unload_namespace(
    tenant: TenantName, namespace: NamespaceName, lookup: LookupDep
) -> Response:
    await lookup.unload(tenant, namespace)
    return Response(status_code=204)
