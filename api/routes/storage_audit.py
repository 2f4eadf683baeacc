"""Extension: the placement audit of the live cluster, run in the background.

`POST /admin/v2/storage/audit` starts `python -m pipeline snapshot` and then
`python -m pipeline audit` as child processes (Spark never runs in the server) and returns the
audit's id; `GET .../{id}` gives its state, progress and summary, `GET .../{id}/report` its
HTML report. `POST .../{id}/repair` hands the audit's repair plan to the replication workers;
its progress is the `repair` field of `GET .../{id}`. Pulsar has none of these; they are tagged
`extensions`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict

from api.deps import app_state
from api.services.storage_audit import AuditJob, StorageAuditService
from api.shapes.params import AuditId
from storage.autorecovery import RepairProgress

router = APIRouter(prefix="/admin/v2/storage", tags=["extensions"])

EXAMPLE_REPAIR: JsonDict = {
    "state": "DONE", "moves": 3, "applied": 2,
    "skipped": [{"ledgerId": 12, "segment": 0, "position": 1, "bookieOut": "127.0.0.1:3182",
                 "bookieIn": "127.0.0.1:3184",
                 "reason": "position 1 holds 127.0.0.1:3185, not 127.0.0.1:3182"}],
    "failed": [], "unfixableFragments": 1, "startedAt": 1763913700000,
    "finishedAt": 1763913702000,
}


class RepairStatus(BaseModel):
    """Progress of applying an audit's repair plan."""

    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_REPAIR]})

    state: str = Field(description="RUNNING or DONE")
    moves: int = Field(description="Moves in the plan (ledger, segment, position, bookie out, "
                                   "bookie in)")
    applied: int = Field(description="Moves copied, verified and swapped in")
    skipped: list[dict[str, Any]] = Field(
        description="Moves that no longer apply to the live cluster, each with its reason")
    failed: list[dict[str, Any]] = Field(
        description="Moves that could not run after retries, each with its reason")
    unfixableFragments: int = Field(
        description="Fragments the plan itself said it cannot fix (unfixable.parquet)")
    startedAt: int = Field(description="Start time, ms since the epoch")
    finishedAt: int | None = Field(description="End time, ms since the epoch; null: running")

    @classmethod
    def of(cls, progress: RepairProgress) -> RepairStatus:
        return cls(**progress.to_json())


EXAMPLE_STATUS: JsonDict = {
    "id": "3f2a9c41d07e",
    "state": "DONE",
    "stage": "done",
    "progress": 1.0,
    "ledgersRead": 1200,
    "startedAt": 1763913600000,
    "finishedAt": 1763913641000,
    "error": None,
    "summary": {"ledgers": 1200, "fragments": 1500, "violating_ledgers": 3,
                "violations_by_kind": {"NOT_REGISTERED": 2, "FOREIGN_GROUP": 1}},
}


class AuditStatus(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_STATUS]})

    id: str
    state: str = Field(description="SNAPSHOT, AUDIT, DONE or FAILED")
    stage: str = Field(description="What the running step is doing, from its progress lines")
    progress: float = Field(description="A rough share done, 0 to 1")
    ledgersRead: int = Field(description="Ledgers the snapshot has read so far")
    startedAt: int = Field(description="Start time, ms since the epoch")
    finishedAt: int | None = Field(description="End time, ms since the epoch; null: running")
    error: str | None = Field(description="Why the audit failed; null unless FAILED")
    summary: dict[str, Any] | None = Field(
        description="The audit's summary.json once DONE (counts, violations by kind and "
        "namespace, skew, the plan's figures); null before")
    repair: RepairStatus | None = Field(
        default=None, description="The repair of this audit's plan once started; null before")

    @classmethod
    def of(cls, job: AuditJob) -> AuditStatus:
        return cls(id=job.id, state=job.state, stage=job.stage, progress=job.progress(),
                   ledgersRead=job.ledgers_read, startedAt=int(job.started * 1000),
                   finishedAt=None if job.finished is None else int(job.finished * 1000),
                   error=job.error, summary=job.summary,
                   repair=None if job.repair is None else RepairStatus.of(job.repair))


def get_audits(request: Request) -> StorageAuditService:
    """The app's audit service (`api.state.Services`)."""
    return app_state(request).services.storage_audits


AuditsDep = Annotated[StorageAuditService, Depends(get_audits)]


@router.post(
    "/audit",
    operation_id="startStorageAudit",
    summary="Start a placement audit of every ledger in the background",
    description=(
        "Snapshots the metadata store (ledger metadata, `/bookies`, registrations, namespace "
        "policies, the broker's placement settings) and audits every fragment with the live "
        "placement rules on Spark, in child processes. Returns at once with the audit's id and "
        "state; poll `GET /admin/v2/storage/audit/{auditId}`. 409 while another audit runs."
    ),
    response_model=AuditStatus,
    responses={409: {"description": "Another audit is still running"}},
)
async def start_audit(audits: AuditsDep) -> AuditStatus:
    return AuditStatus.of(audits.start())


@router.get(
    "/audit/{auditId}",
    operation_id="getStorageAudit",
    summary="State, progress and summary of a placement audit",
    description=(
        "`state` is SNAPSHOT, AUDIT, DONE or FAILED; `summary` is the audit's summary.json once "
        "DONE, `error` names the problem when FAILED (an unreachable store, a value that cannot "
        "be decoded, a Spark failure)."
    ),
    response_model=AuditStatus,
    responses={404: {"description": "No audit with this id (audits are kept per process)"}},
)
async def get_audit(auditId: AuditId, audits: AuditsDep) -> AuditStatus:
    return AuditStatus.of(audits.get(auditId))


@router.get(
    "/audit/{auditId}/report",
    operation_id="getStorageAuditReport",
    summary="The audit's HTML report",
    description=(
        "A self-contained page (works offline): bytes per rack and bookie, violations per "
        "namespace and kind, the rack-by-group map, the repair plan's figures and what it "
        "cannot fix."
    ),
    response_class=HTMLResponse,
    responses={
        200: {"content": {"text/html": {"example": "<!doctype html><html>...</html>"}}},
        404: {"description": "No audit with this id"},
        409: {"description": "The audit is not DONE"},
    },
)
async def get_audit_report(auditId: AuditId, audits: AuditsDep) -> HTMLResponse:
    return HTMLResponse(audits.report(auditId).read_text())


@router.post(
    "/audit/{auditId}/repair",
    operation_id="repairStorageAudit",
    summary="Hand the audit's repair plan to the replication workers",
    description=(
        "Starts applying the DONE audit's repair plan (`repair_plan.parquet`: ledger, segment, "
        "position, bookie out, bookie in) in the background and answers 202 with its counts. "
        "Each move is checked again before copying: the segment must still hold the bookie "
        "out at that position, the bookie in must be writable, allowed by the ledger's "
        "recorded placement policy (strict groups never left) and not already in the "
        "segment, and the move must add no violation; a move that no longer applies is "
        "skipped with its reason. The entries are copied with the replication worker's "
        "verified copy and the segment swapped by compare-and-swap. Progress: the `repair` "
        "field of `GET /admin/v2/storage/audit/{auditId}`. Fragments the plan cannot fix "
        "(`unfixable.parquet`, with reasons) are left as they are."
    ),
    status_code=202,
    response_model=RepairStatus,
    responses={404: {"description": "No audit with this id"},
               409: {"description": "The audit is not DONE, or its repair is running"}},
)
async def repair_audit(auditId: AuditId, audits: AuditsDep) -> RepairStatus:
    return RepairStatus.of(audits.repair(auditId))
