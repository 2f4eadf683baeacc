"""Extensions: the placement dry run of a namespace and the bookie configuration lint.

Pulsar has neither; both are read-only and tagged `extensions` (`x-pulsar-extension: true`).
Mounted after the namespaces router, so no upstream `/admin/v2/namespaces/...` path is shadowed.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from api.deps import LintDep, PlacementDep
from api.services.lint import KINDS
from api.services.placement import Sizes

router = APIRouter(prefix="/admin/v2", tags=["extensions"])


class PreviewBookie(BaseModel):
    bookieId: str
    group: str | None = Field(description="The bookie's group in the rack map; null: ungrouped")
    rack: str = Field(description="The location placement used (default rack when unset)")
    source: str = Field(description="Why it was eligible: primary, secondary, ungrouped or any")


class PreviewExcluded(BaseModel):
    bookieId: str
    reason: str


class PlacementPreview(BaseModel):
    ensemble: list[PreviewBookie]
    adherence: str = Field(description="MEETS_STRICT, MEETS_SOFT or FAIL (a best effort)")
    reasons: list[str] = Field(description="Why the ensemble is graded as it is")
    excluded: list[PreviewExcluded] = Field(description="Every other bookie, with the reason")
    policy: dict[str, Any] = Field(description="Mode, sizes, rack rules and isolation groups")


class LintWarning(BaseModel):
    kind: str
    bookieId: str | None = None
    group: str | None = None
    namespace: str | None = None
    message: str


class LintReport(BaseModel):
    warnings: list[LintWarning]


SIZE_HELP = "Default: the namespace's persistence policy, else managedLedgerDefault{}."
PREVIEW_DESCRIPTION = (
    "Dry run of `newEnsemble` for a new ledger of the namespace on the live topology (rack "
    "map and registered bookies, as of now): the chosen bookies with group, rack and source "
    "(`primary`, `secondary`, `ungrouped`, `any`), the adherence verdict and every other bookie "
    "with the reason it was left out. Isolation follows the namespace's bookie affinity group "
    "(strict extension included), else the broker's `bookkeeperClientIsolationGroups` / "
    "`strictBookieAffinityEnabled`. A random choice among equals, so two previews may differ. "
    "Nothing is written. 412 names the constraint that could not be met (which set was short "
    "and by how many)."
)
LINT_DESCRIPTION = (
    "Warnings about rack and group configuration that silently weakens placement. Each warning "
    "has a stable `kind`, a `message`, and `bookieId`, `group` or `namespace` when it is about "
    "one (absent keys are omitted). Kinds:\n\n"
    + "\n".join(f"- `{kind}`: {meaning}" for kind, meaning in KINDS.items())
)


@router.get(
    "/namespaces/{tenant}/{namespace}/placement",
    operation_id="getPlacementPreview",
    summary="Preview where a new ledger of the namespace would be placed, and why",
    description=PREVIEW_DESCRIPTION,
    response_model=None,
    responses={
        200: {"model": PlacementPreview},
        400: {"description": "Invalid sizes: non-positive, E < Qw or Qw < Qa"},
        404: {"description": "Namespace does not exist"},
        412: {"description": "Not enough bookies: the set that was short and by how many"},
    },
)
async def get_placement_preview(
    tenant: str,
    namespace: str,
    placement: PlacementDep,
    ensembleSize: int | None = Query(
        default=None, ge=-(2**31), le=2**31 - 1, description=SIZE_HELP.format("EnsembleSize")
    ),
    writeQuorum: int | None = Query(
        default=None, ge=-(2**31), le=2**31 - 1, description=SIZE_HELP.format("WriteQuorum")
    ),
    ackQuorum: int | None = Query(
        default=None, ge=-(2**31), le=2**31 - 1, description=SIZE_HELP.format("AckQuorum")
    ),
) -> JSONResponse:
    sizes = Sizes(ensembleSize, writeQuorum, ackQuorum)
    return JSONResponse(await placement.preview(tenant, namespace, sizes))


@router.get(
    "/bookies/lint",
    operation_id="lintBookies",
    summary="Warnings about bookie rack and group configuration",
    description=LINT_DESCRIPTION,
    response_model=LintReport,
    response_model_exclude_none=True,
)
async def lint_bookies(lint: LintDep) -> dict[str, Any]:
    return {"warnings": await lint.lint()}
