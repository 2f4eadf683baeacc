"""`/admin/v2/storage/bookies`: the storage engine's bookies, and control of the local ones
(`python -m api --bookies N`). Extensions: Pulsar has no such paths. See
`api.services.storage_bookies` for where each field comes from and how control works."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field

from api.deps import StorageBookiesDep
from api.shapes.params import StorageBookieId
from storage.autorecovery import DecommissionState

router = APIRouter(prefix="/admin/v2/storage/bookies", tags=["extensions"])

EXAMPLE_BOOKIE: dict[str, Any] = {
    "id": "127.0.0.1:3181",
    "state": "writable",
    "rack": "/rack1",
    "group": "iso",
    "ledgers": 3,
    "supervised": True,
    "diskUsed": 4259840,
    "diskCapacity": 107374182400,
}


class StorageBookie(BaseModel):
    """One bookie as the storage engine sees it."""

    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_BOOKIE]})

    id: str = Field(description="Bookie id, `host:port`")
    state: str = Field(
        description="`writable` or `read-only` by its registration, else `stopped`"
    )
    rack: str | None = Field(description="Rack in the rack map, null when it has no entry")
    group: str | None = Field(description="Bookie affinity group in the rack map, or null")
    ledgers: int = Field(description="Ledgers whose ensembles include it")
    supervised: bool = Field(description="Whether this service runs it (and can control it)")
    diskUsed: int | None = Field(
        description="Bytes its data directory takes (supervised bookies only, else null)"
    )
    diskCapacity: int | None = Field(
        description="Size of the file system of its data directory (supervised only, else null)"
    )


EXAMPLE_DECOMMISSION: dict[str, Any] = {
    "bookie": "127.0.0.1:3181",
    "state": "BLOCKED",
    "stage": "1 ledger(s) cannot move; retrying every 2s",
    "startedAt": 1763913600000,
    "finishedAt": None,
    "ledgersTotal": 12,
    "ledgersMoved": 11,
    "ledgersRemaining": 1,
    "stuck": {"7": "strict group 'share' has no other writable bookie: Not enough bookies: "
                   "writable bookies in groups 'share' (strict) has 0, need 1"},
}


class DecommissionStatus(BaseModel):
    """A bookie's decommission: where it stands and, per ledger that cannot move, why."""

    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_DECOMMISSION]})

    bookie: str = Field(description="Bookie id, `host:port`")
    state: str = Field(description="`RUNNING`; `BLOCKED`: a pass moved nothing while ledgers "
                                   "remain (retried); `DONE`: nothing on it, bookie removed")
    stage: str = Field(description="What it is doing now")
    startedAt: int = Field(description="Start time, ms since the epoch")
    finishedAt: int | None = Field(description="End time (ms since the epoch); null: not DONE")
    ledgersTotal: int = Field(description="Ledgers that listed the bookie (moved + remaining)")
    ledgersMoved: int = Field(description="Ledgers moved off the bookie")
    ledgersRemaining: int = Field(description="Ledgers whose ensembles still list the bookie")
    stuck: dict[str, str] = Field(description="Ledger id -> why it cannot move now")

    @classmethod
    def of(cls, state: DecommissionState) -> DecommissionStatus:
        return cls(bookie=state.bookie, state=state.state, stage=state.stage,
                   startedAt=state.startedAt, finishedAt=state.finishedAt,
                   ledgersTotal=state.ledgersTotal, ledgersMoved=state.ledgersMoved,
                   ledgersRemaining=state.ledgersRemaining,
                   stuck={str(k): v for k, v in sorted(state.stuck.items())})


def _error(description: str) -> dict[str, Any]:
    return {"description": description}


NOT_FOUND = "No such bookie: not registered, not in the rack map, not supervised"
NOT_SUPERVISED = "The bookie is known but not run by this service"


def _errors(conflict: str) -> dict[int | str, dict[str, Any]]:
    return {404: _error(NOT_FOUND), 409: _error(conflict), 412: _error(NOT_SUPERVISED)}


@router.get(
    "",
    operation_id="getStorageBookies",
    summary="Lists the bookies with their state, rack, group, disk use and ledger count",
    response_model=list[StorageBookie],
    responses={200: {"content": {"application/json": {"example": [EXAMPLE_BOOKIE]}}}},
)
async def get_storage_bookies(service: StorageBookiesDep) -> list[StorageBookie]:
    """Every bookie known from its registration (`/ledgers/available`), the rack map
    (`/bookies`) or this service's supervisor, sorted by id.

    `state` is `writable` or `read-only` from the registration, `stopped` for a bookie that
    is not registered. `diskUsed` and `diskCapacity` are null for bookies this service does not
    run. `ledgers` counts the ledgers whose ensembles (any of them) include the bookie.
    """
    return [StorageBookie(**vars(status)) for status in await service.list()]


@router.put(
    "/{bookie}",
    operation_id="startStorageBookie",
    summary="Starts a supervised bookie that was stopped",
    status_code=204,
    responses=_errors("The bookie is already running"),
)
async def start_storage_bookie(bookie: StorageBookieId, service: StorageBookiesDep) -> Response:
    """Start a bookie stopped with `POST .../{bookie}/stop`; the supervisor restarts it again
    after a crash from then on. Answers once the bookie registers (or after 15 s)."""
    await service.start(bookie)
    return Response(status_code=204)


@router.post(
    "/{bookie}/stop",
    operation_id="stopStorageBookie",
    summary="Stops a supervised bookie uncleanly (SIGKILL, registration lease revoked)",
    status_code=204,
    responses=_errors("The bookie is already stopped"),
)
async def stop_storage_bookie(bookie: StorageBookieId, service: StorageBookiesDep) -> Response:
    """Kill the bookie process (no checkpoint, files as they are, as after a crash) and revoke
    its registration's lease, so clients see it gone at once. The supervisor does not restart
    it until `PUT .../{bookie}`; on that start it replays its journal."""
    await service.stop(bookie)
    return Response(status_code=204)


@router.post(
    "/{bookie}/readonly",
    operation_id="setStorageBookieReadOnly",
    summary="Switches a supervised bookie to read-only",
    status_code=204,
    responses=_errors("The bookie is not running"),
)
async def set_storage_bookie_readonly(
    bookie: StorageBookieId, service: StorageBookiesDep
) -> Response:
    """Write the flag file `force-readonly` in the bookie's data directory and signal it
    (SIGUSR1): its disk check then moves its registration under
    `/ledgers/available/readonly/` and it refuses new adds, as a full disk would. It stays
    read-only, across restarts, while the file exists (delete it to make it writable at its
    next disk check). Answers once the registration moved (or after 15 s)."""
    await service.readonly(bookie)
    return Response(status_code=204)


@router.delete(
    "/{bookie}",
    operation_id="decommissionStorageBookie",
    summary="Decommissions a bookie: moves every ledger fragment off it, then removes it",
    status_code=202,
    response_model=DecommissionStatus,
    responses={
        202: {"content": {"application/json": {"example": {
            **EXAMPLE_DECOMMISSION, "state": "RUNNING", "stage": "making the bookie read-only",
            "ledgersTotal": 0, "ledgersMoved": 0, "ledgersRemaining": 0, "stuck": {}}}}},
        404: _error(NOT_FOUND),
        409: _error("A decommission of this bookie is running"),
        412: _error("The bookie is not run by this service and still registered: shut it "
                    "down first"),
    },
)
async def decommission_storage_bookie(
    bookie: StorageBookieId, service: StorageBookiesDep
) -> DecommissionStatus:
    """BookKeeper's `decommissionbookie` as a background job. A bookie this service runs is
    made read-only first (nothing new lands on it, it still serves reads); each ledger that
    lists it gets its fragments copied to bookies the ledger's recorded placement policy
    accepts (strict groups never left; copies verified; metadata by compare-and-swap); then
    the bookie is stopped, its data directory renamed `bookie-<port>.decommissioned`, its
    registration and its rack-map entry (`/bookies`) removed. An open ledger is left to its
    writer for `openLedgerRereplicationGracePeriod` ms, then recovered and closed. A ledger
    that cannot move (e.g. its strict group has no other writable bookie) is retried and its
    reason shown by `GET .../{bookie}/decommission`. The state is kept in etcd
    (`/storage/decommission/{bookie}`): a restarted service resumes it. A bookie of another
    machine must be shut down first (412 while registered), as upstream requires."""
    return DecommissionStatus.of(await service.decommission(bookie))


@router.get(
    "/{bookie}/decommission",
    operation_id="getStorageBookieDecommission",
    summary="Progress of a bookie's decommission, with the reason for each ledger stuck",
    response_model=DecommissionStatus,
    responses={
        200: {"content": {"application/json": {"example": EXAMPLE_DECOMMISSION}}},
        404: _error("No decommission of this bookie was ever started"),
    },
)
async def get_storage_bookie_decommission(
    bookie: StorageBookieId, service: StorageBookiesDep
) -> DecommissionStatus:
    """State (RUNNING, BLOCKED, DONE), ledgers total, moved and remaining, and for each ledger
    that cannot move now its reason. Read from etcd, so it answers after a restart and after
    the bookie is gone."""
    return DecommissionStatus.of(await service.decommission_status(bookie))
