"""`/admin/v2/storage/bookies`: the storage engine's bookies, and control of the local ones
(`python -m api --bookies N`). Extensions: Pulsar has no such paths. See
`api.services.storage_bookies` for where each field comes from and how control works."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field

from api.deps import StorageBookiesDep
from api.params import StorageBookieId

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
