"""The error answers of every operation, declared in `openapi.yaml` from one table.

The server answers errors as Pulsar does, `{"reason": "..."}` (`ErrorResponse`), never
FastAPI's 422: a request that fails validation is a 400. Applied once when the document is
built (`install_error_responses`), so route decorators keep only what is particular to them.

Which statuses an operation declares:
- every operation: 400 (a parameter or the URI is invalid), 500 (a stored document cannot be
  read: Pulsar's "Failed to deserialize payload for key '...'"), 503 (the metadata store did
  not answer within the request deadline);
- every write (POST, PUT, DELETE): 409 (a compare-and-swap lost after all retries) and 413
  (the body is over `httpMaxRequestSize`, or the document over etcd's request limit);
- every POST and PUT: 415 (a body, or a Content-Type, that is not JSON);
- the statuses of `STATUSES_BY_OPERATION` (what the services raise for that operation).
A description a route already gives for a status is kept; the schema is added to it. A
content a route already declares for an error status is kept as it is: BookKeeper's HTTP admin
paths answer their errors as bare text, not Pulsar's JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

ERROR_SCHEMA_NAME = "ErrorResponse"
ERROR_SCHEMA: dict[str, Any] = {
    "title": ERROR_SCHEMA_NAME,
    "type": "object",
    "properties": {"reason": {"type": "string", "title": "Reason"}},
    "required": ["reason"],
    "description": 'Pulsar\'s error body: `{"reason": "..."}`',
}

DESCRIPTIONS: dict[int, str] = {
    400: "Invalid request: a parameter, the URI or the body breaks a rule",
    401: "Authentication required",
    403: "Forbidden",
    404: "Not found",
    405: "Not allowed",
    406: "Not acceptable: a partition count out of bounds",
    409: "Conflict: already exists, or a concurrent modification",
    412: "Precondition failed: an invalid name, or a missing dependency",
    413: "Request body over httpMaxRequestSize, or a document over etcd's request limit",
    415: "Unsupported media type: bodies are application/json",
    422: "Unprocessable: a partition count a topic cannot grow to",
    500: "A stored document cannot be read (the reason names its key)",
    501: "Not implemented yet (the reason says what is missing)",
    503: "The metadata store did not answer in time",
}

ALWAYS = (400, 500, 503)
WRITES = (409, 413)
BODIES = (413, 415)

STATUSES_BY_OPERATION: dict[str, tuple[int, ...]] = {
    "getBookieRackInfo": (404,),
    "updateBookieRackInfo": (412,),
    "deleteBookieRackInfo": (404,),
    "getActiveBrokers": (404, 412),
    "getNamespaceIsolationPolicies": (404,),
    "getBrokersWithNamespaceIsolationPolicy": (404, 412),
    "getBrokerWithNamespaceIsolationPolicy": (404, 412),
    "getNamespaceIsolationPolicy": (404, 412),
    "setNamespaceIsolationPolicy": (412,),
    "deleteNamespaceIsolationPolicy": (412,),
    "getCluster": (404,),
    "createCluster": (412,),
    "updateCluster": (404,),
    "deleteCluster": (404, 412),
    "getPeerCluster": (404,),
    "setPeerClusterNames": (404, 412),
    "getDomain": (404, 412),
    "setFailureDomain": (412,),
    "deleteFailureDomain": (404, 412),
    "getTenantAdmin": (404,),
    "createTenant": (412,),
    "updateTenant": (404, 412),
    "deleteTenant": (404, 405),
    "getTenantNamespaces": (404, 412),
    "getPolicies": (404, 412),
    "createNamespace": (403, 404, 412),
    "deleteNamespace": (404, 405, 412),
    "getNamespaceAntiAffinityGroup": (404, 412),
    "setNamespaceAntiAffinityGroup": (404, 412),
    "removeNamespaceAntiAffinityGroup": (404, 412),
    "getPersistence": (404, 412),
    "setPersistence": (404, 412),
    "deletePersistence": (404, 412),
    "getBookieAffinityGroup": (404, 412),
    "setBookieAffinityGroup": (404, 412),
    "deleteBookieAffinityGroup": (404, 412),
    "getAntiAffinityNamespaces": (412,),
    "getAntiAffinityNamespacesV1": (412,),
    "getPlacementPreview": (404, 412),
    "lookupTopicAsync": (404, 412),
    "unloadNamespace": (404, 412),
    "produceOnPersistentTopic": (404, 412),
    "produceOnPersistentTopicPartition": (404, 412),
    "getList": (404, 412),
    "createNonPartitionedTopic": (404, 409, 412),
    "deleteTopic": (404, 409, 412),
    "getPartitionedTopicList": (404, 412),
    "getNonPersistentPartitionedTopicList": (404, 412),
    "createPartitionedTopic": (404, 406, 409, 412),
    "getPartitionedMetadata": (404, 412),
    "getPartitionedStatsInternal": (404, 412),
    "updatePartitionedTopic": (409, 412, 422),
    "deletePartitionedTopic": (404, 409, 412),
    "getInternalStats": (404, 412),
    "getMessageById": (404, 412),
    "examineMessage": (404, 405, 412),
    "bookkeeperGetLedgerMetadata": (404,),
    "getStorageBookies": (),
    "getChanges": (),
    "startStorageBookie": (404, 409, 412),
    "stopStorageBookie": (404, 409, 412),
    "setStorageBookieReadOnly": (404, 409, 412),
    "decommissionStorageBookie": (404, 409, 412),
    "getStorageBookieDecommission": (404,),
    "repairStorageAudit": (404, 409),
}


def statuses_of(method: str, operation: dict[str, Any]) -> set[int]:
    statuses = set(ALWAYS) | set(STATUSES_BY_OPERATION.get(operation.get("operationId", ""), ()))
    if method in ("post", "put", "delete"):
        statuses |= set(WRITES)
    if method in ("post", "put"):
        statuses |= set(BODIES)
    return statuses


def apply_error_responses(document: dict[str, Any]) -> None:
    """Declare every operation's error answers in `document` (in place); drop FastAPI's 422."""
    reference = {"$ref": f"#/components/schemas/{ERROR_SCHEMA_NAME}"}
    for methods in document.get("paths", {}).values():
        for method, operation in methods.items():
            responses: dict[str, Any] = operation.setdefault("responses", {})
            responses.pop("422", None)
            for status in statuses_of(method, operation) | {
                int(s) for s in responses if s.isdigit() and int(s) >= 400
            }:
                entry = responses.setdefault(str(status), {"description": DESCRIPTIONS[status]})
                entry.setdefault("content", {"application/json": {"schema": reference}})
            operation["responses"] = dict(sorted(responses.items()))
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    schemas[ERROR_SCHEMA_NAME] = ERROR_SCHEMA
    document["components"]["schemas"] = dict(sorted(schemas.items()))


def install_error_responses(app: FastAPI) -> None:
    """Wrap `app.openapi` so the document it builds (once) carries the error answers."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            apply_error_responses(build())
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
