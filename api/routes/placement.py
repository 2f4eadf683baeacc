"""Extensions: the placement dry run of a namespace and the bookie configuration lint.

Pulsar has neither; both are read-only and tagged `extensions` (`x-pulsar-extension: true`).
Mounted after the namespaces router, so no upstream `/admin/v2/namespaces/...` path is shadowed.
"""

from __future__ import annotations

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict

from api.deps import LintDep, PlacementDep
from api.services.placement import Sizes
from api.shapes.params import NamespaceName, TenantName
from placement import Explanation, PlacementConfig
from placement import lint as lint_rules

router = APIRouter(prefix="/admin/v2", tags=["extensions"])


# What the server answers for three registered bookies (two in `group-ssd`, one ungrouped), a
# rack entry for an unregistered one, and a namespace with strict affinity to `group-ssd`.
EXAMPLE_PREVIEW: JsonDict = {
    "ensemble": [
        {"bookieId": "10.0.0.8:3181", "group": "group-ssd", "rack": "/rack3", "source": "primary"},
        {"bookieId": "10.0.0.7:3181", "group": "group-ssd", "rack": "/rack2", "source": "primary"},
    ],
    "adherence": "MEETS_STRICT",
    "reasons": ["every write quorum spans >= 2 racks"],
    "excluded": [
        {"bookieId": "10.0.0.5:3181", "reason": "not registered (listed in the rack map only)"},
        {"bookieId": "10.0.0.9:3181", "reason": "ungrouped, not allowed under strict isolation"},
        {"bookieId": "127.0.0.1:3181", "reason": "other group 'default'"},
    ],
    "policy": {
        "mode": "rack-aware",
        "ensembleSize": 2,
        "writeQuorum": 2,
        "ackQuorum": 2,
        "minNumRacksPerWriteQuorum": 2,
        "enforceMinNumRacksPerWriteQuorum": False,
        "diskWeightBasedPlacementEnabled": False,
        "isolation": {"primary": ["group-ssd"], "secondary": [], "strict": True},
    },
}
EXAMPLE_LINT: JsonDict = {
    "warnings": [
        {
            "kind": "unracked-bookie",
            "bookieId": "10.0.0.9:3181",
            "message": "Bookie 10.0.0.9:3181 is registered but has no rack information; it is "
            "placed on /default-rack",
        },
        {
            "kind": "unregistered-rack-entry",
            "bookieId": "10.0.0.5:3181",
            "group": "default",
            "message": "Rack map lists bookie 10.0.0.5:3181 (group 'default') but it is not "
            "registered",
        },
    ]
}


class PreviewBookie(BaseModel):
    bookieId: str
    group: str | None = Field(description="The bookie's group in the rack map; null: ungrouped")
    rack: str = Field(description="The location placement used (default rack when unset)")
    source: str = Field(description="Why it was eligible: primary, secondary, ungrouped or any")


class PreviewExcluded(BaseModel):
    bookieId: str
    reason: str


class PreviewIsolation(BaseModel):
    primary: list[str]
    secondary: list[str]
    strict: bool


class PreviewPolicy(BaseModel):
    mode: str
    ensembleSize: int
    writeQuorum: int
    ackQuorum: int
    minNumRacksPerWriteQuorum: int
    enforceMinNumRacksPerWriteQuorum: bool
    diskWeightBasedPlacementEnabled: bool
    isolation: PreviewIsolation | None = Field(description="The groups in effect; null: none")


class PlacementPreview(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_PREVIEW]})

    ensemble: list[PreviewBookie]
    adherence: str = Field(description="MEETS_STRICT, MEETS_SOFT or FAIL (a best effort)")
    reasons: list[str] = Field(description="Why the ensemble is graded as it is")
    excluded: list[PreviewExcluded] = Field(description="Every other bookie, with the reason")
    policy: PreviewPolicy = Field(description="Mode, sizes, rack rules and isolation groups")

    @classmethod
    def of(cls, explanation: Explanation, config: PlacementConfig) -> PlacementPreview:
        placement, request, groups = explanation.placement, explanation.request, explanation.groups
        return cls(
            ensemble=[
                PreviewBookie(bookieId=b.bookie_id, group=b.group, rack=b.rack,
                              source=b.source.value)
                for b in placement.bookies
            ],
            adherence=placement.adherence.name,
            reasons=list(placement.reasons),
            excluded=[PreviewExcluded(bookieId=e.bookie_id, reason=e.reason)
                      for e in explanation.excluded],
            policy=PreviewPolicy(
                mode=explanation.mode.value,
                ensembleSize=request.ensemble_size,
                writeQuorum=request.write_quorum,
                ackQuorum=request.ack_quorum,
                minNumRacksPerWriteQuorum=config.min_num_racks_per_write_quorum,
                enforceMinNumRacksPerWriteQuorum=config.enforce_min_num_racks_per_write_quorum,
                diskWeightBasedPlacementEnabled=config.disk_weight_based_placement_enabled,
                isolation=None if groups is None else PreviewIsolation(
                    primary=list(groups.primary), secondary=list(groups.secondary),
                    strict=groups.strict),
            ),
        )  # fmt: skip


class LintWarning(BaseModel):
    kind: str
    bookieId: str | None = None
    group: str | None = None
    namespace: str | None = None
    message: str

    @classmethod
    def of(cls, warning: lint_rules.LintWarning) -> LintWarning:
        return cls(kind=warning.kind, bookieId=warning.bookie_id, group=warning.group,
                   namespace=warning.namespace, message=warning.message)  # fmt: skip


class LintReport(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_LINT]})

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
    + "\n".join(f"- `{kind}`: {meaning}" for kind, meaning in lint_rules.KINDS.items())
)


@router.get(
    "/namespaces/{tenant}/{namespace}/placement",
    operation_id="getPlacementPreview",
    summary="Preview where a new ledger of the namespace would be placed, and why",
    description=PREVIEW_DESCRIPTION,
    response_model=PlacementPreview,
    responses={
        400: {"description": "Invalid sizes: non-positive, E < Qw or Qw < Qa"},
        404: {"description": "Namespace does not exist"},
        412: {"description": "Not enough bookies: the set that was short and by how many"},
    },
)
async def get_placement_preview(
    tenant: TenantName,
    namespace: NamespaceName,
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
) -> PlacementPreview:
    sizes = Sizes(ensembleSize, writeQuorum, ackQuorum)
    explanation = await placement.preview(tenant, namespace, sizes)
    return PlacementPreview.of(explanation, placement.config)


@router.get(
    "/bookies/lint",
    operation_id="lintBookies",
    summary="Warnings about bookie rack and group configuration",
    description=LINT_DESCRIPTION,
    response_model=LintReport,
    response_model_exclude_none=True,
)
async def lint_bookies(lint: LintDep) -> LintReport:
    return LintReport(warnings=[LintWarning.of(w) for w in await lint.lint()])
