"""`/admin/v2/bookies`: bookie rack placement."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request, Response

from api.deps import MetastoreDep, RacksDep
from api.services.racks import all_bookies, parse_rack_write
from api.shapes.models import BookieInfo, BookiesClusterInfo, RawBookieInfo
from api.shapes.params import BookieId
from api.shapes.responses import RackMap

router = APIRouter(prefix="/admin/v2/bookies", tags=["bookies"])

# The rack write's body, read by `parse_rack_write` rather than bound by FastAPI: documented
# as FastAPI documents an optional `BookieInfo` body.
RACK_WRITE_BODY = {
    "content": {
        "application/json": {
            "schema": {
                "anyOf": [{"$ref": "#/components/schemas/BookieInfo"}, {"type": "null"}],
                "title": "Info",
            }
        }
    }
}


@router.get(
    "/racks-info",
    operation_id="getBookiesRackInfo",
    summary="Gets the rack placement information for all the bookies in the cluster",
    response_model=RackMap,
)
async def get_bookies_rack_info(racks: RacksDep) -> Response:
    """The whole rack map: bookie group -> bookie id -> rack info, both levels sorted by key.

    `{}` when no rack information was ever stored. Placement reads the same document
    (`/bookies` in the metadata store), so this is the topology new ledgers are placed on.
    """
    return Response(await racks.racks_info_json(), media_type="application/json")


@router.get(
    "/racks-info/{bookie}",
    operation_id="getBookieRackInfo",
    summary="Gets the rack placement information for a specific bookie in the cluster",
    response_model=BookieInfo,
    response_model_exclude_none=True,
    responses={404: {"description": "Bookie rack placement configuration not found"}},
)
async def get_bookie_rack_info(bookie: BookieId, racks: RacksDep) -> BookieInfo:
    """The rack and hostname recorded for one bookie, whichever group it is in.

    404 when the bookie has no entry in the rack map (registration alone does not create one).
    """
    return await racks.get_bookie(bookie)


@router.post(
    "/racks-info/{bookie}",
    operation_id="updateBookieRackInfo",
    summary="Updates the rack placement information for a specific bookie in the cluster",
    status_code=204,
    responses={412: {"description": "Missing group, or a rack name invalid for the mode"}},
    openapi_extra={"requestBody": RACK_WRITE_BODY},
)
async def update_bookie_rack_info(
    bookie: BookieId,
    racks: RacksDep,
    request: Request,
    group: str | None = Query(default=None, description="Bookie group the bookie belongs to"),
) -> Response:
    """Put a bookie in a rack and a group (create or replace its entry).

    `group` is required: a bookie belongs to exactly one group, so an update first removes it from
    the group that held it, and a group left empty disappears. The bookie need not be registered.
    With `bookkeeperClientRackawarePolicyEnabled` (the default) the rack must be one path level
    (`/rack1`), with `bookkeeperClientRegionawarePolicyEnabled` two (`/region1/rack1`); leading and
    trailing slashes do not count. Takes effect for the next placement, without a restart.
    """
    # Parsed by hand with the function the rack-write fast path (api.http.hot_path) uses too.
    await racks.set_bookie(bookie, group, parse_rack_write(await request.body()))
    return Response(status_code=204)


@router.delete(
    "/racks-info/{bookie}",
    operation_id="deleteBookieRackInfo",
    summary="Removed the rack placement information for a specific bookie in the cluster",
    status_code=204,
    responses={404: {"description": "Bookie rack placement configuration not found"}},
)
async def delete_bookie_rack_info(bookie: BookieId, racks: RacksDep) -> Response:
    """Remove a bookie's rack entry; a group left empty disappears.

    The bookie then counts as ungrouped and falls back to the default rack for placement.
    """
    await racks.delete_bookie(bookie)
    return Response(status_code=204)


@router.get(
    "/all",
    operation_id="getAllBookies",
    summary="Gets raw information for all the bookies in the cluster",
    response_model=BookiesClusterInfo,
)
async def get_all_bookies(store: MetastoreDep) -> BookiesClusterInfo:
    """Every bookie of the cluster, running or not: those with a BookKeeper cookie
    (`/ledgers/cookies/{bookieId}`, written at a bookie's first start and kept while it is
    down), as Pulsar lists them (its registration client's `getAllBookies`), in the order of
    the Java `HashSet` it reads them into.

    Independent of rack information and of registration: `GET /admin/v2/storage/bookies`
    and BookKeeper's `/api/v1/bookie/list_bookies` say which are running.
    """
    bookies = await all_bookies(store)
    return BookiesClusterInfo(bookies=[RawBookieInfo(bookieId=b) for b in bookies])
