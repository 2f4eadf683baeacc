"""`/admin/v2/bookies`: bookie rack placement."""

from __future__ import annotations

from fastapi import APIRouter, Body, Query, Response

from api.deps import MetastoreDep, RacksDep
from api.models import BookieInfo, BookiesClusterInfo, RawBookieInfo
from api.services.racks import registered_bookies

router = APIRouter(prefix="/admin/v2/bookies", tags=["bookies"])


@router.get(
    "/racks-info",
    operation_id="getBookiesRackInfo",
    summary="Gets the rack placement information for all the bookies in the cluster",
    response_model=dict[str, dict[str, BookieInfo]],
)
async def get_bookies_rack_info(racks: RacksDep) -> Response:
    return Response(await racks.racks_info_json(), media_type="application/json")


@router.get(
    "/racks-info/{bookie}",
    operation_id="getBookieRackInfo",
    summary="Gets the rack placement information for a specific bookie in the cluster",
    response_model=BookieInfo,
    response_model_exclude_none=True,
    responses={404: {"description": "Bookie rack placement configuration not found"}},
)
async def get_bookie_rack_info(bookie: str, racks: RacksDep) -> BookieInfo:
    return await racks.get_bookie(bookie)


@router.post(
    "/racks-info/{bookie}",
    operation_id="updateBookieRackInfo",
    summary="Updates the rack placement information for a specific bookie in the cluster",
    status_code=204,
    responses={412: {"description": "Missing group, or a rack name invalid for the mode"}},
)
async def update_bookie_rack_info(
    bookie: str,
    racks: RacksDep,
    info: BookieInfo | None = Body(default=None),
    group: str | None = Query(default=None, description="Bookie group the bookie belongs to"),
) -> Response:
    await racks.set_bookie(bookie, group, info or BookieInfo())
    return Response(status_code=204)


@router.delete(
    "/racks-info/{bookie}",
    operation_id="deleteBookieRackInfo",
    summary="Removed the rack placement information for a specific bookie in the cluster",
    status_code=204,
    responses={404: {"description": "Bookie rack placement configuration not found"}},
)
async def delete_bookie_rack_info(bookie: str, racks: RacksDep) -> Response:
    await racks.delete_bookie(bookie)
    return Response(status_code=204)


@router.get(
    "/all",
    operation_id="getAllBookies",
    summary="Gets raw information for all the bookies in the cluster",
    response_model=BookiesClusterInfo,
)
async def get_all_bookies(store: MetastoreDep) -> BookiesClusterInfo:
    bookies = await registered_bookies(store)
    return BookiesClusterInfo(bookies=[RawBookieInfo(bookieId=b) for b in bookies])
