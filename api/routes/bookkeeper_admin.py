"""BookKeeper's own HTTP admin paths (`/api/v1/...`), as a bookie's HTTP server answers them:
ledger metadata, the ledger list and the bookie list. Tagged `extensions` (they are not
Pulsar admin paths); the answers copy upstream's, quirks included (see
`api.services.bookkeeper_admin`):

- no Content-Type header: upstream's server sets none, and its clients parse the body
  regardless; we copy that rather than label a body upstream does not label;
- each path also answers with a trailing slash (the documented form);
- PUT, POST and DELETE are routed to the same handler upstream and answered
  404 `Not found method. Should be GET method`; they are left out of the OpenAPI document.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from api.deps import BookKeeperAdminDep
from api.services.bookkeeper_admin import NOT_GET_ANSWER, NOT_PUT_ANSWER, AdminAnswer

router = APIRouter(prefix="/api/v1", tags=["extensions"])

OTHER_METHODS = ["PUT", "POST", "DELETE"]
TEXT_BODY = {"content": {"text/plain": {"schema": {"type": "string"}}}}


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
    description=(
        'BookKeeper\'s `GET /api/v1/ledger/metadata?ledger_id=N`: `{"N": <metadata>}` '
        "with the fields of BookKeeper's `LedgerMetadataImpl` (bytes base64, ensembles as "
        '`{"id": bookie}` objects). No `ledger_id`: 404; an unknown ledger: 500, as upstream.'
    ),
    responses={
        200: {"description": "Jackson-pretty JSON, sent without Content-Type", **TEXT_BODY},
        404: {"description": "`Not found method. Should be GET method`", **TEXT_BODY},
        500: {"description": "`Internal Server Error` (e.g. no such ledger)", **TEXT_BODY},
    },
    response_class=Response,
    openapi_extra=_query(("ledger_id", "The ledger id (a Java long)")),
)
@router.get("/ledger/metadata/", include_in_schema=False, response_class=Response)
async def get_ledger_metadata(request: Request, service: BookKeeperAdminDep) -> Response:
    return _answer(await service.ledger_metadata(_params(request)))


@router.get(
    "/ledger/list",
    operation_id="bookkeeperListLedgers",
    summary="BookKeeper: every ledger id, optionally with its metadata",
    description=(
        'BookKeeper\'s `GET /api/v1/ledger/list`: `{"<id>": null}` by id; with '
        "`print_metadata=true` the value is the stored metadata as a string (binary, so "
        "garbled), with `decode_meta=true` as well the decoded metadata. `page` (1-based, "
        "100 a page) applies only with `print_metadata=true`; page 1 holds 99 ledgers, as "
        "upstream's arithmetic makes it."
    ),
    responses={200: {"description": "Jackson-pretty JSON, sent without Content-Type", **TEXT_BODY}},
    response_class=Response,
    openapi_extra=_query(
        ("print_metadata", "`true`: each id maps to its metadata"),
        ("decode_meta", "`true` (with print_metadata): the metadata decoded"),
        ("page", "1-based page of 100 ledgers (with print_metadata)"),
    ),
)
@router.get("/ledger/list/", include_in_schema=False, response_class=Response)
async def list_ledgers(request: Request, service: BookKeeperAdminDep) -> Response:
    return _answer(await service.list_ledgers(_params(request)))


@router.get(
    "/bookie/list_bookies",
    operation_id="bookkeeperListBookies",
    summary="BookKeeper: registered bookies",
    description=(
        "BookKeeper's `GET /api/v1/bookie/list_bookies?type=rw|ro&print_hostnames=true`: "
        "bookie id to hostname (null without `print_hostnames=true`); any `type` but `ro` "
        "means writable bookies."
    ),
    responses={200: {"description": "Jackson-pretty JSON, sent without Content-Type", **TEXT_BODY}},
    response_class=Response,
    openapi_extra=_query(
        ("type", "`ro`: read-only bookies; anything else: writable ones"),
        ("print_hostnames", "`true`: map each bookie to its hostname"),
    ),
)
@router.get("/bookie/list_bookies/", include_in_schema=False, response_class=Response)
async def list_bookies(request: Request, service: BookKeeperAdminDep) -> Response:
    return _answer(await service.list_bookies(_params(request)))


for _path in ("/ledger/metadata", "/ledger/list", "/bookie/list_bookies"):
    _other_methods(_path)


@router.get(
    "/autorecovery/list_under_replicated_ledger",
    operation_id="bookkeeperListUnderReplicatedLedgers",
    summary="BookKeeper: ledgers marked under-replicated",
    description=(
        "BookKeeper's `GET /api/v1/autorecovery/list_under_replicated_ledger/`: a JSON array "
        "of ledger ids; with `printmissingreplica` (present is enough) a map of ledger id to "
        "the bookies missing a copy. `missingreplica` keeps ledgers missing that bookie, "
        "`excludingmissingreplica` drops them. None: 404 `No under replicated ledgers found`."
    ),
    responses={
        200: {"description": "Jackson-pretty JSON, sent without Content-Type", **TEXT_BODY},
        404: {"description": "`No under replicated ledgers found`", **TEXT_BODY},
    },
    response_class=Response,
    openapi_extra=_query(
        ("missingreplica", "only ledgers missing this bookie"),
        ("excludingmissingreplica", "only ledgers not missing this bookie"),
        ("printmissingreplica", "present: map each ledger to its missing bookies"),
    ),
)
@router.get("/autorecovery/list_under_replicated_ledger/", include_in_schema=False,
            response_class=Response)
async def list_under_replicated(request: Request, service: BookKeeperAdminDep) -> Response:
    return _answer(await service.list_under_replicated(_params(request)))


_other_methods("/autorecovery/list_under_replicated_ledger")


@router.put(
    "/autorecovery/trigger_audit",
    operation_id="bookkeeperTriggerAudit",
    summary="BookKeeper: ask the auditor for an audit now",
    description=(
        "BookKeeper's `PUT /api/v1/autorecovery/trigger_audit`: rewrites "
        "`/ledgers/underreplication/lostBookieRecoveryDelay` with its value, which the elected "
        "auditor answers with a lost-bookie audit and a placement check. "
        "200 `Success trigger audit.`"
    ),
    responses={200: {"description": "`Success trigger audit.`", **TEXT_BODY}},
    response_class=Response,
)
@router.put("/autorecovery/trigger_audit/", include_in_schema=False, response_class=Response)
async def trigger_audit(service: BookKeeperAdminDep) -> Response:
    return _answer(await service.trigger_audit())


async def _not_put() -> Response:
    return _answer(NOT_PUT_ANSWER)


for _suffix in ("", "/"):
    router.add_api_route("/autorecovery/trigger_audit" + _suffix, _not_put,
                         methods=["GET", "POST", "DELETE"], include_in_schema=False)


@router.get(
    "/autorecovery/who_is_auditor",
    operation_id="bookkeeperWhoIsAuditor",
    summary="BookKeeper: the elected auditor",
    description=(
        "BookKeeper's `GET /api/v1/autorecovery/who_is_auditor/`: plain text "
        "`Auditor: <id>` (the id the auditor wrote at `/ledgers/underreplication/leader`); "
        "none elected: 404 `No auditor elected`."
    ),
    responses={
        200: {"description": "`Auditor: <id>`", **TEXT_BODY},
        404: {"description": "`No auditor elected`", **TEXT_BODY},
    },
    response_class=Response,
)
@router.get("/autorecovery/who_is_auditor/", include_in_schema=False, response_class=Response)
async def who_is_auditor(service: BookKeeperAdminDep) -> Response:
    return _answer(await service.who_is_auditor())


_other_methods("/autorecovery/who_is_auditor")
