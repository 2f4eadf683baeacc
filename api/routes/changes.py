"""Extension: the change history of admin writes, `GET /admin/v2/changes`.

Pulsar has no such path; it is tagged `extensions` (`x-pulsar-extension: true`) and needs
super-user (`api.auth.authorization.RULES`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict

from api.deps import ChangeHistoryDep
from api.services.changes import MAX_LIMIT

router = APIRouter(prefix="/admin/v2", tags=["extensions"])

EXAMPLE_CHANGE: JsonDict = {
    "revision": 1042,
    "time": 1795000000000,
    "role": "admin",
    "clientAddress": "10.0.0.12",
    "method": "POST",
    "path": "/admin/v2/bookies/racks-info/10.0.0.7:3181",
    "changes": [
        {
            "key": "/bookies",
            "partial": False,
            "before": {"default": {"10.0.0.6:3181": {"rack": "/rack1"}}},
            "after": {
                "default": {
                    "10.0.0.6:3181": {"rack": "/rack1"},
                    "10.0.0.7:3181": {"rack": "/rack2", "hostname": "bk7"},
                }
            },
        }
    ],
}


class KeyChange(BaseModel):
    key: str = Field(description="The etcd key (Pulsar metadata path) written")
    partial: bool = Field(
        default=False,
        description="True: `before` and `after` hold only the parts that differ (a document "
        "over 16 KiB, e.g. a large rack map): a key in both changed, in `before` only was "
        "removed, in `after` only was added; objects in both are compared key by key",
    )
    before: Any = Field(description="The stored document before; null: the key was created")
    after: Any = Field(description="The stored document after; null: the key was deleted")


class ChangeRecord(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_CHANGE]})

    revision: int = Field(description="The etcd revision of the write's transaction")
    time: int = Field(description="When the server wrote it, milliseconds since the epoch")
    role: str | None = Field(description="The authenticated role; null: authentication off")
    clientAddress: str | None = Field(description="The client's IP address")
    method: str
    path: str = Field(description="The request path")
    changes: list[KeyChange]


DESCRIPTION = (
    "Every successful write of the admin API, recorded in the same etcd transaction as the "
    "write: when, by which role (null when authentication is off) from which address, the "
    "method and path, each stored document before and after (null before a create, after a "
    "delete) and the transaction's etcd revision. Ordered by revision, and within one "
    "transaction (group commit shares one among concurrent rack writes) in the order the "
    "writes were applied. `since`: only revisions after it (pass the last revision you saw "
    "to page on; a transaction is never split between pages). `prefix`: only records whose "
    "request path or a changed key starts with it (`/bookies`, `/admin/clusters/c1`, "
    "`/admin/v2/namespaces/public`). Retention: `changeHistoryMaxRecords`, "
    "`changeHistoryMaxAgeSeconds`."
)


@router.get(
    "/changes",
    operation_id="getChanges",
    summary="The change history of admin writes",
    description=DESCRIPTION,
    response_model=list[ChangeRecord],
    responses={200: {"content": {"application/json": {"example": [EXAMPLE_CHANGE]}}}},
)
async def get_changes(
    history: ChangeHistoryDep,
    since: int = Query(
        default=0, ge=0, le=2**62, description="Only changes at revisions after this one"
    ),
    prefix: str = Query(
        default="", description="Only changes whose request path or a changed key starts so"
    ),
    limit: int = Query(
        default=1000, ge=1, le=MAX_LIMIT, description="At most this many records"
    ),
) -> list[dict[str, Any]]:
    """The change history after revision `since`, oldest first."""
    return await history.changes(since, prefix, limit)
