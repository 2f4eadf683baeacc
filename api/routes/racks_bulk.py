"""Extension: the whole rack map in one request (`PUT /admin/v2/bookies/racks-info`).

Pulsar changes racks one bookie per call (apache/pulsar#14248); operators who keep the rack map
in a file want to apply it as a whole, see the diff first, and remove what the file no longer
lists. Tagged `extensions` (`x-pulsar-extension: true`); the upstream GET on the same path is
unchanged.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict

from api.deps import RackImportDep
from api.shapes.models import BookieInfo

router = APIRouter(prefix="/admin/v2/bookies", tags=["extensions"])

EXAMPLE_DOCUMENT = {
    "default": {"127.0.0.1:3181": {"rack": "/rack1", "hostname": "127.0.0.1"}},
    "group-ssd": {"10.0.0.7:3181": {"rack": "/rack2"}},
}
EXAMPLE_RESULT: JsonDict = {
    "dryRun": True,
    "prune": True,
    "added": [{"bookie": "10.0.0.7:3181", "group": "group-ssd", "rack": "/rack2"}],
    "changed": [
        {
            "bookie": "127.0.0.1:3181",
            "before": {"bookie": "127.0.0.1:3181", "group": "default", "rack": "/rack9"},
            "after": {
                "bookie": "127.0.0.1:3181",
                "group": "default",
                "rack": "/rack1",
                "hostname": "127.0.0.1",
            },
        }
    ],
    "removed": [{"bookie": "10.0.0.5:3181", "group": "default", "rack": "/rack3"}],
    "unchanged": 0,
}


class RackImportResult(BaseModel):
    """What the import changed (or, with `dryRun`, would change)."""

    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_RESULT]})

    dryRun: bool = Field(description="True when nothing was written")
    prune: bool = Field(description="Whether entries missing from the document are removed")
    added: list[dict[str, Any]] = Field(description="Entries new in the rack map")
    changed: list[dict[str, Any]] = Field(
        description="Entries whose group, rack or hostname changes, `before` and `after`"
    )
    removed: list[dict[str, Any]] = Field(description="Entries removed (prune only)")
    unchanged: int = Field(description="Entries of the document already as stored")
    revision: int | None = Field(
        default=None, description="etcd revision of the write (absent: nothing written)"
    )


RackDocument = Annotated[
    dict[str, dict[str, BookieInfo]],
    Body(
        description="A whole BookiesRackConfiguration: group -> bookie id -> rack info",
        openapi_examples={
            "racks": {"summary": "two groups", "value": EXAMPLE_DOCUMENT},
        },
    ),
]


@router.put(
    "/racks-info",
    operation_id="importBookiesRackInfo",
    summary="Extension: apply a whole rack map at once (validated as a whole, one write)",
    response_model=RackImportResult,
    response_model_exclude_none=True,
    responses={412: {"description": "An entry breaks a rack or name rule (the first is named)"}},
)
async def import_bookies_rack_info(
    document: RackDocument,
    racks: RackImportDep,
    dryRun: bool = Query(default=False, description="Only compute the diff; write nothing"),
    prune: bool = Query(default=False, description="Remove the entries the document does not list"),
) -> RackImportResult:
    """Apply a `BookiesRackConfiguration` (the shape `GET /bookies/racks-info` answers).

    Every entry is validated first with the rules of `POST /bookies/racks-info/{bookie}` (rack
    depth for the placement mode, names, a bookie in one group only); one bad entry fails the
    whole request with 412 and nothing is written. Then the new map is written in one
    compare-and-swap: a concurrent rack write either lands before (and is kept, unless `prune`
    removes it) or after; no reader ever sees part of the import. Without `prune` the document
    is merged: listed bookies are set (moved to their group), others stay. `dryRun=true`
    returns the same diff and changes nothing.
    """
    diff, revision = await racks.apply(document, dry_run=dryRun, prune=prune)
    return RackImportResult(
        dryRun=dryRun,
        prune=prune,
        added=diff.added,
        changed=diff.changed,
        removed=diff.removed,
        unchanged=diff.unchanged,
        revision=revision,
    )
