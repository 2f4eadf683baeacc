"""BookKeeper's own HTTP admin paths (`/api/v1/...`), as a bookie's HTTP server answers them:
ledger metadata, the ledger list and the bookie list. Tagged `extensions` (they are not
Pulsar admin paths); the answers copy upstream's, quirks included (see
`api.services.bookkeeper_admin`):

- no Content-Type header: upstream's server sets none, and its clients parse the body
  regardless; we copy that rather than label a body upstream does not label. The OpenAPI
  document declares what the bodies are (JSON on 200, text on 404 and 500) and says in each
  description that the header is absent;
- each path also answers with a trailing slash (the documented form);
- PUT, POST and DELETE are routed to the same handler upstream and answered
  404 `Not found method. Should be GET method`; they are left out of the OpenAPI document.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, Response

from api.deps import BookKeeperAdminDep, StorageBookiesDep
from api.errors import ServiceError
from api.services.bookkeeper_admin import (
    INTERNAL_ERROR,
    NOT_GC_METHOD,
    NOT_GET,
    NOT_GET_ANSWER,
    NOT_PUT_ANSWER,
    AdminAnswer,
)

router = APIRouter(prefix="/api/v1", tags=["extensions"])

OTHER_METHODS = ["PUT", "POST", "DELETE"]
UNLABELLED = "sent without a Content-Type header, as a bookie's HTTP server sends it"
NOT_GET_404: dict[str, Any] = {
    "description": f"`{NOT_GET}` ({UNLABELLED})",
    "content": {"text/plain": {"schema": {"type": "string"}, "example": NOT_GET}},
}
INTERNAL_500: dict[str, Any] = {
    "description": f"`{INTERNAL_ERROR}`: the handler failed, as upstream's ({UNLABELLED})",
    "content": {"text/plain": {"schema": {"type": "string"}, "example": INTERNAL_ERROR}},
}
EXAMPLE_LEDGER: dict[str, Any] = {
    "ledgerId": 1, "metadataFormatVersion": 3, "ensembleSize": 2, "writeQuorumSize": 2,
    "ackQuorumSize": 2, "state": "OPEN", "length": 0, "lastEntryId": -1, "ctime": 0,
    "digestType": "CRC32C", "password": "",
    "customMetadata": {"application": "cHVsc2Fy"},
    "allEnsembles": {"0": [{"id": "127.0.0.1:3181"}, {"id": "127.0.0.2:3181"}]},
    "closed": False, "ctoken": 0,
}  # fmt: skip


def _json_200(description: str, schema: dict[str, Any], example: Any) -> dict[str, Any]:
    """A 200 whose body is Jackson-pretty JSON, declared as JSON though sent unlabelled."""
    return {
        "description": f"{description}: Jackson-pretty JSON, {UNLABELLED}",
        "content": {"application/json": {"schema": schema, "example": example}},
    }


NULLABLE_STRING = {"anyOf": [{"type": "string"}, {"type": "null"}]}


def _query(*described: tuple[str, str]) -> dict[str, Any]:
    """Query parameters for the OpenAPI document only: they are read as upstream reads them
    (text, last value wins), so a bad value gets upstream's answer, not a validation error."""
    return {
        "parameters": [
            {"name": name, "in": "query", "required": False, "schema": {"type": "string"},
             "description": text}
            for name, text in described
        ]
    }  # fmt: skip


def _answer(answer: AdminAnswer) -> Response:
    return Response(answer.body, status_code=answer.status, media_type=None)


def _params(request: Request) -> dict[str, str]:
    """Query parameters as upstream reads them: one value per name, the last one wins."""
    return dict(request.query_params)


async def _not_get() -> Response:
    return _answer(NOT_GET_ANSWER)


def _other_methods(path: str) -> None:
    for suffix in ("", "/"):
        router.add_api_route(
            path + suffix, _not_get, methods=OTHER_METHODS, include_in_schema=False
        )


@router.get(
    "/ledger/metadata",
    operation_id="bookkeeperGetLedgerMetadata",
    summary="BookKeeper: one ledger's metadata",
    responses={
        200: _json_200(
            "Ledger id -> its metadata",
            {"type": "object", "additionalProperties": {"type": "object"}},
            {"1": EXAMPLE_LEDGER},
        ),
        404: {**NOT_GET_404, "description": f"No `ledger_id`: {NOT_GET_404['description']}"},
        500: {
            **INTERNAL_500,
            "description": "No such ledger, or an id that is not a Java "
            f"long: {INTERNAL_500['description']}",
        },
    },
    response_class=Response,
    openapi_extra=_query(("ledger_id", "The ledger id (a Java long)")),
)
@router.get("/ledger/metadata/", include_in_schema=False, response_class=Response)
async def get_ledger_metadata(request: Request, service: BookKeeperAdminDep) -> Response:
    """BookKeeper's `GET /api/v1/ledger/metadata?ledger_id=N`: `{"N": <metadata>}` with the
    fields of BookKeeper's `LedgerMetadataImpl` (bytes base64, ensembles as `{"id": bookie}`
    objects). No `ledger_id`: 404; an unknown ledger: 500, as upstream."""
    return _answer(await service.ledger_metadata(_params(request)))


@router.get(
    "/ledger/list",
    operation_id="bookkeeperListLedgers",
    summary="BookKeeper: every ledger id, optionally with its metadata",
    responses={
        200: _json_200(
            "Ledger id -> null, the stored metadata as a string, or the decoded metadata",
            {
                "type": "object",
                "additionalProperties": {"anyOf": [{"type": "object"}, *NULLABLE_STRING["anyOf"]]},
            },
            {"1": None, "2": None},
        ),
        500: {
            **INTERNAL_500,
            "description": "A `page` that is not a Java int, or the store "
            f"failed: {INTERNAL_500['description']}",
        },
    },
    response_class=Response,
    openapi_extra=_query(
        ("print_metadata", "`true`: each id maps to its metadata"),
        ("decode_meta", "`true` (with print_metadata): the metadata decoded"),
        ("page", "1-based page of 100 ledgers (with print_metadata)"),
    ),
)
@router.get("/ledger/list/", include_in_schema=False, response_class=Response)
async def list_ledgers(request: Request, service: BookKeeperAdminDep) -> Response:
    """BookKeeper's `GET /api/v1/ledger/list`: `{"<id>": null}` by id; with
    `print_metadata=true` the value is the stored metadata as a string (binary, so garbled),
    with `decode_meta=true` as well the decoded metadata. `page` (1-based, 100 a page) applies
    only with `print_metadata=true`; page 1 holds 99 ledgers, as upstream's arithmetic makes
    it."""
    return _answer(await service.list_ledgers(_params(request)))


@router.get(
    "/bookie/list_bookies",
    operation_id="bookkeeperListBookies",
    summary="BookKeeper: registered bookies",
    responses={
        200: _json_200(
            "Bookie id -> hostname (null without `print_hostnames=true`)",
            {"type": "object", "additionalProperties": NULLABLE_STRING},
            {"127.0.0.1:3181": "127.0.0.1", "127.0.0.2:3181": "127.0.0.2"},
        ),
        500: {
            **INTERNAL_500,
            "description": "A registration cannot be read, or the store "
            f"failed: {INTERNAL_500['description']}",
        },
    },
    response_class=Response,
    openapi_extra=_query(
        ("type", "`ro`: read-only bookies; anything else: writable ones"),
        ("print_hostnames", "`true`: map each bookie to its hostname"),
    ),
)
@router.get("/bookie/list_bookies/", include_in_schema=False, response_class=Response)
async def list_bookies(request: Request, service: BookKeeperAdminDep) -> Response:
    """BookKeeper's `GET /api/v1/bookie/list_bookies?type=rw|ro&print_hostnames=true`: bookie
    id to hostname (null without `print_hostnames=true`); any `type` but `ro` means writable
    bookies."""
    return _answer(await service.list_bookies(_params(request)))


for _path in ("/ledger/metadata", "/ledger/list", "/bookie/list_bookies"):
    _other_methods(_path)


def _text(description: str, example: str) -> dict[str, Any]:
    """A bare-text answer, declared as text though sent unlabelled."""
    return {
        "description": f"{description} ({UNLABELLED})",
        "content": {"text/plain": {"schema": {"type": "string"}, "example": example}},
    }


@router.get(
    "/autorecovery/list_under_replicated_ledger",
    operation_id="bookkeeperListUnderReplicatedLedgers",
    summary="BookKeeper: ledgers marked under-replicated",
    responses={
        200: _json_200(
            "Ledger ids, or with `printmissingreplica` ledger id -> bookies missing a copy",
            {"anyOf": [
                {"type": "array", "items": {"type": "integer"}},
                {"type": "object", "additionalProperties": {
                    "type": "array", "items": {"type": "string"}}},
            ]},
            [3, 7],
        ),
        404: _text("None marked: `No under replicated ledgers found`",
                   "No under replicated ledgers found"),
    },
    response_class=Response,
    openapi_extra=_query(
        ("missingreplica", "only ledgers missing this bookie"),
        ("excludingmissingreplica", "only ledgers not missing this bookie"),
        ("printmissingreplica", "present: map each ledger to its missing bookies"),
    ),
)  # fmt: skip
@router.get("/autorecovery/list_under_replicated_ledger/", include_in_schema=False,
            response_class=Response)
async def list_under_replicated(request: Request, service: BookKeeperAdminDep) -> Response:
    """BookKeeper's `GET /api/v1/autorecovery/list_under_replicated_ledger/`: a JSON array of
    ledger ids; with `printmissingreplica` (present is enough) a map of ledger id to the
    bookies missing a copy. `missingreplica` keeps ledgers missing that bookie,
    `excludingmissingreplica` drops them. None: 404 `No under replicated ledgers found`."""
    return _answer(await service.list_under_replicated(_params(request)))


_other_methods("/autorecovery/list_under_replicated_ledger")


@router.put(
    "/autorecovery/trigger_audit",
    operation_id="bookkeeperTriggerAudit",
    summary="BookKeeper: ask the auditor for an audit now",
    responses={200: _text("`Success trigger audit.`", "Success trigger audit.")},
    response_class=Response,
)
@router.put("/autorecovery/trigger_audit/", include_in_schema=False, response_class=Response)
async def trigger_audit(service: BookKeeperAdminDep) -> Response:
    """BookKeeper's `PUT /api/v1/autorecovery/trigger_audit`: rewrites
    `/ledgers/underreplication/lostBookieRecoveryDelay` with its value, which the elected
    auditor answers with a lost-bookie audit and a placement check. 200
    `Success trigger audit.`"""
    return _answer(await service.trigger_audit())


async def _not_put() -> Response:
    return _answer(NOT_PUT_ANSWER)


for _suffix in ("", "/"):
    router.add_api_route("/autorecovery/trigger_audit" + _suffix, _not_put,
                         methods=["GET", "POST", "DELETE"], include_in_schema=False)


DECOMMISSION_FAILED = "Exception when send decommission command."


@router.put(
    "/autorecovery/decommission",
    operation_id="bookkeeperDecommissionBookie",
    summary="BookKeeper: decommission a bookie in the background",
    responses={
        200: _text("`Success send decommission Bookie command <host:port>`",
                   "Success send decommission Bookie command 127.0.0.1:3181"),
        404: _text("No body, no `bookie_src`, a bad `host:port`, or the decommission refused "
                   "(unknown bookie, one running, a bookie of another machine still "
                   f"registered): `{DECOMMISSION_FAILED}<reason>`", DECOMMISSION_FAILED),
    },
    response_class=Response,
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"type": "object", "properties": {"bookie_src": {"type": "string"}},
                   "required": ["bookie_src"]},
        "example": {"bookie_src": "127.0.0.1:3181"}}}}},
)
@router.put("/autorecovery/decommission/", include_in_schema=False, response_class=Response)
async def decommission_bookie(request: Request, service: StorageBookiesDep) -> Response:
    """BookKeeper's `PUT /api/v1/autorecovery/decommission` with `{"bookie_src": "host:port"}`
    (`DecommissionService`): starts the same decommission as
    `DELETE /admin/v2/storage/bookies/{bookie}` and answers 200 at once; progress at
    `GET /admin/v2/storage/bookies/{bookie}/decommission`. Upstream's answers otherwise: 404
    `Null request body for DecommissionService.`, `Request body not contains bookie_src.`, and
    `Exception when send decommission command.<message>`, which here also carries why the
    decommission was refused (upstream logs that from its background job)."""
    body = await request.body()
    if not body.strip():
        return _answer(AdminAnswer(404, "Null request body for DecommissionService."))
    try:
        config = json.loads(body)
    except ValueError as exc:
        return _answer(AdminAnswer(404, f"{DECOMMISSION_FAILED}{exc}"))
    source = config.get("bookie_src") if isinstance(config, dict) else None
    if source is None:
        return _answer(AdminAnswer(404, "Request body not contains bookie_src."))
    host, _, port = str(source).partition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        return _answer(AdminAnswer(404, f"{DECOMMISSION_FAILED}bad bookie_src {source!r}"))
    bookie = f"{host}:{int(port)}"
    try:
        await service.decommission(bookie)
    except ServiceError as exc:
        return _answer(AdminAnswer(404, f"{DECOMMISSION_FAILED}{exc.reason}"))
    return _answer(AdminAnswer(200, f"Success send decommission Bookie command {bookie}"))


for _suffix in ("", "/"):
    router.add_api_route("/autorecovery/decommission" + _suffix, _not_put,
                         methods=["GET", "POST", "DELETE"], include_in_schema=False)


@router.get(
    "/autorecovery/who_is_auditor",
    operation_id="bookkeeperWhoIsAuditor",
    summary="BookKeeper: the elected auditor",
    responses={
        200: _text("`Auditor: <id>`", "Auditor: 127.0.0.1:8080"),
        404: _text("None elected: `No auditor elected`", "No auditor elected"),
    },
    response_class=Response,
)
@router.get("/autorecovery/who_is_auditor/", include_in_schema=False, response_class=Response)
async def who_is_auditor(service: BookKeeperAdminDep) -> Response:
    """BookKeeper's `GET /api/v1/autorecovery/who_is_auditor/`: plain text `Auditor: <id>`
    (the id the auditor wrote at `/ledgers/underreplication/leader`); none elected: 404
    `No auditor elected`."""
    return _answer(await service.who_is_auditor())


_other_methods("/autorecovery/who_is_auditor")


GC_500 = {**INTERNAL_500, "description": f"A body that is not JSON with boolean `forceMajor` and "
          f"`forceMinor`, or the store failed: {INTERNAL_500['description']}"}


@router.put(
    "/bookie/gc",
    operation_id="bookkeeperTriggerGc",
    summary="BookKeeper: force a garbage collection on every bookie",
    responses={
        200: _json_200(
            "A JSON string naming the bookies asked",
            {"type": "string"},
            "Triggered GC on BookieServer: Bookie Server listening on 127.0.0.1:3181 with id "
            "127.0.0.1:3181",
        ),
        500: GC_500,
    },
    response_class=Response,
    openapi_extra={"requestBody": {"required": False, "content": {"application/json": {
        "schema": {"type": "object", "properties": {
            "forceMajor": {"type": "boolean"}, "forceMinor": {"type": "boolean"}}},
        "example": {"forceMajor": True, "forceMinor": False}}}}},
)  # fmt: skip
@router.put("/bookie/gc/", include_in_schema=False, response_class=Response)
async def trigger_gc(request: Request, service: BookKeeperAdminDep) -> Response:
    """BookKeeper's `PUT /api/v1/bookie/gc` (`TriggerGCService`), for the cluster: every
    registered bookie starts a forced garbage collection (deleted ledgers dropped, empty entry
    logs deleted, compaction by the forced rules). Without a body the bookies' disk-pressure
    suspensions hold; with `{"forceMajor": bool, "forceMinor": bool}` a false flag skips that
    compaction. The request reaches the bookies through the metadata store: the service
    writes it at `/bookie-gc/request`, each bookie watches that key. 200 with the JSON string
    `Triggered GC on BookieServer: ...`."""
    return _answer(await service.trigger_gc(await request.body()))


@router.get(
    "/bookie/gc",
    operation_id="bookkeeperGetGcState",
    summary="BookKeeper: whether a forced garbage collection is running",
    responses={
        200: _json_200(
            "`is_in_force_gc`: \"true\" while any registered bookie runs a forced GC",
            {"type": "object", "properties": {"is_in_force_gc": {"type": "string"}}},
            {"is_in_force_gc": "false"},
        ),
        500: INTERNAL_500,
    },
    response_class=Response,
)
@router.get("/bookie/gc/", include_in_schema=False, response_class=Response)
async def gc_state(service: BookKeeperAdminDep) -> Response:
    """BookKeeper's `GET /api/v1/bookie/gc`: `{"is_in_force_gc" : "true"}` while a forced
    GC is pending or running on any registered bookie (each keeps its state at
    `/bookie-gc/state/{bookieId}`), else `"false"`."""
    return _answer(await service.gc_state())


async def _not_gc_method() -> Response:
    return _answer(AdminAnswer(404, NOT_GC_METHOD))


for _suffix in ("", "/"):
    router.add_api_route("/bookie/gc" + _suffix, _not_gc_method, methods=["POST", "DELETE"],
                         include_in_schema=False)
