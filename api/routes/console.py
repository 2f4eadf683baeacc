"""Extensions for the placement console (`/console/`): its overview, a namespace's ledgers
and the preview of a change. Pulsar has no such paths; all three are read-only and tagged
`extensions`. See `api.services.console` for what each field holds."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Body, Depends, Request, Response

from api.deps import app_state
from api.services.console import ConsoleService, parse_change
from api.shapes.params import NamespaceName, TenantName

router = APIRouter(prefix="/admin/v2/console", tags=["extensions"])

EXAMPLE_VIOLATION: dict[str, Any] = {
    "ledgerId": 7,
    "namespace": "public/iso",
    "topic": "public/iso/persistent/orders",
    "firstEntry": 0,
    "ensemble": ["10.0.0.7:3181", "10.0.0.9:3181"],
    "kinds": ["FOREIGN_GROUP"],
    "reasons": ["10.0.0.9:3181 is in group 'other', not one of primary ['ssd']"],
}
EXAMPLE_OVERVIEW: dict[str, Any] = {
    "cluster": "standalone",
    "mode": "rack-aware",
    "revision": 42,
    "superUser": True,
    "tenants": None,
    "ledgerStatus": {"state": "ready", "read": 3, "total": 3},
    "bookies": [{
        "id": "10.0.0.7:3181", "hostname": "bk7", "group": "ssd", "rack": "/rack1",
        "region": None, "state": "writable", "diskUsed": 4259840,
        "diskCapacity": 107374182400, "ledgers": 3,
    }],
    "namespaces": [{
        "name": "public/iso", "primary": ["ssd"], "secondary": [], "strict": True,
        "ownGroups": True, "ensembleSize": 2, "writeQuorum": 2, "ackQuorum": 2,
        "antiAffinityGroup": None, "usableBookies": ["10.0.0.7:3181", "10.0.0.8:3181"],
        "topics": 1, "ledgers": 3,
    }],
    "violations": [EXAMPLE_VIOLATION],
    "shortNamespaces": [],
    "auditReport": None,
}  # fmt: skip
EXAMPLE_PREVIEW: dict[str, Any] = {
    "violationsBefore": 0,
    "violationsAfter": 1,
    "newViolations": [EXAMPLE_VIOLATION],
    "resolvedViolations": [],
    "shortNamespaces": [{"namespace": "public/iso", "usableBookies": 1, "ensembleSize": 2}],
    "newShortNamespaces": [{"namespace": "public/iso", "usableBookies": 1, "ensembleSize": 2}],
}
EXAMPLE_LEDGERS: dict[str, Any] = {
    "namespace": "public/iso",
    "ledgerStatus": {"state": "ready", "read": 3, "total": 3},
    "topics": [{"name": "public/iso/persistent/orders", "ledgers": [{
        "ledgerId": 7, "state": "CLOSED", "ensembleSize": 2, "writeQuorum": 2, "ackQuorum": 2,
        "ensembles": [{"firstEntry": 0, "bookies": ["10.0.0.7:3181", "10.0.0.8:3181"]}],
    }]}],
}  # fmt: skip
EXAMPLE_CHANGE: dict[str, Any] = {"bookie": {"id": "10.0.0.9:3181", "group": "ssd",
                                            "rack": "/rack2"}}


async def get_console(request: Request) -> ConsoleService:
    state = app_state(request)
    return ConsoleService(
        state.store, state.console_ledgers, state.topology, state.placement_config,
        state.services.tenants, state.services.namespaces, state.services.storage_bookies,
        state.guard, state.services.storage_audits.root, state.settings.clusterName,
    )  # fmt: skip


ConsoleDep = Annotated[ConsoleService, Depends(get_console)]


def json_response(document: dict[str, Any]) -> Response:
    """Large documents (10,000 bookies, every violation) encoded by orjson at once, not
    walked by FastAPI's encoder."""
    return Response(orjson.dumps(document), media_type="application/json")


def role_of(request: Request) -> str | None:
    role: str | None = getattr(request.state, "role", None)
    return role


@router.get(
    "/overview",
    operation_id="getConsoleOverview",
    summary="Extension: bookies, namespaces and placement violations, as the console shows them",
    description=(
        "The bookies (state in words: `writable`, `read-only`, `registered but unplaced`, "
        "`not running`; disk use of supervised bookies; ledger count), every namespace (its "
        "groups in effect, strict mode, E/Qw/Qa, anti-affinity group and the bookies a new "
        "ledger of it may use), every ledger whose ensemble breaks its namespace's current "
        "policy with the placement engine's reasons, the namespaces with fewer usable "
        "bookies than their ensemble size, and the newest Spark audit report. `revision`: "
        "the etcd revision read (watch from `revision + 1`). `ledgerStatus`: whether every "
        "ledger has been read and judged (`ready`), is being read (`reading`, `read` of "
        "`total`; `violations` and the ledger and topic counts null) or, read, is being "
        "judged for the first time (`judging`; `violations` null). Any "
        "authenticated role; a tenant admin gets its tenants' namespaces and no bookies "
        "(`bookies`: null), with an `ETag`: sent back in `If-None-Match`, it answers 304 "
        "when nothing the document is made of changed (the watch is for super-users only)."
    ),
    responses={
        200: {"content": {"application/json": {"example": EXAMPLE_OVERVIEW}}},
        304: {"description": "Not modified (a tenant admin's `If-None-Match` matched)"},
    },
)
async def get_console_overview(request: Request, console: ConsoleDep) -> Response:
    role = role_of(request)
    tag = await console.validator(role)
    if tag is not None and tag in request.headers.get("if-none-match", "").split(", "):
        return Response(status_code=304, headers={"ETag": tag, "Cache-Control": "no-cache"})
    response = json_response(await console.overview(role))
    if tag is not None:
        response.headers["ETag"] = tag
        response.headers["Cache-Control"] = "no-cache"
    return response


@router.get(
    "/namespaces/{tenant}/{namespace}/ledgers",
    operation_id="getConsoleNamespaceLedgers",
    summary="Extension: a namespace's topics with their ledgers and ensembles",
    description=(
        "Every topic of the namespace that has ledgers (a ledger belongs to the managed ledger "
        "named in its `pulsar/managed-ledger` custom metadata), each ledger with its state, "
        "E/Qw/Qa and every ensemble from its first entry, bookie by bookie; no topics while "
        "the ledgers are being read (`ledgerStatus.state` `reading`, `read` of `total`)."
    ),
    responses={
        200: {"content": {"application/json": {"example": EXAMPLE_LEDGERS}}},
        404: {"description": "Namespace does not exist"},
        412: {"description": "Namespace name is not valid"},
    },
)
async def get_console_namespace_ledgers(
    tenant: TenantName, namespace: NamespaceName, console: ConsoleDep
) -> Response:
    return json_response(await console.namespace_ledgers(tenant, namespace))


@router.post(
    "/preview",
    operation_id="previewConsoleChange",
    summary="Extension: what a change of a bookie or a namespace's groups would lead to",
    description=(
        "Body: `{\"bookie\": {\"id\", \"group\", \"rack\"?, \"hostname\"?}}` (move a bookie "
        "to a group and rack, as `updateBookieRackInfo` would) or `{\"namespace\": {\"name\": "
        "\"tenant/ns\", \"primary\": [...], \"secondary\": [...], \"strict\": bool}}` (the "
        "namespace's bookie affinity groups; both lists empty: its own groups removed). "
        "Answers the ledgers that would break their namespace's policy and did not, the "
        "ones that would stop breaking it, and the namespaces left with fewer usable "
        "bookies than their ensemble size. Nothing is written."
    ),
    responses={
        200: {"content": {"application/json": {"example": EXAMPLE_PREVIEW}}},
        400: {"description": "Neither a bookie nor a namespace change, or malformed"},
        404: {"description": "Namespace does not exist"},
        503: {"description": "The ledgers are still being read, or the metadata store did "
                            "not answer in time"},
    },
)
async def preview_console_change(
    request: Request,
    console: ConsoleDep,
    change: dict[str, Any] = Body(openapi_examples={"bookie": {"value": EXAMPLE_CHANGE}}),
) -> dict[str, Any]:
    return await console.preview(role_of(request), parse_change(change))
