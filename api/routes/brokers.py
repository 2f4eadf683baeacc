"""`/admin/v2/brokers`: registered brokers and the runtime configuration."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from api.deps import MetastoreDep, SettingsDep
from api.secrets import masked_config
from api.services.brokers import Redirect, active_brokers

router = APIRouter(prefix="/admin/v2/brokers", tags=["brokers"])


@router.get(
    "/configuration/runtime",
    operation_id="getRuntimeConfiguration",
    summary="Get all runtime configurations (pulsar-admin clusters list reads clusterName)",
    response_model=dict[str, str],
)
async def get_runtime_configuration(settings: SettingsDep) -> dict[str, str]:
    return masked_config(settings.runtime_configuration())


@router.get(
    "/{cluster}",
    operation_id="getActiveBrokers",
    summary=(
        "Get the list of active brokers (web service addresses) in the cluster. "
        "If authorization is not enabled, any cluster name is valid."
    ),
    response_model=list[str],
    responses={
        307: {"description": "Current broker doesn't serve this cluster"},
        404: {"description": "Cluster does not exist: cluster={clustername}"},
        412: {"description": "The other cluster has no service URL to redirect to"},
    },
)
async def get_active_brokers(
    cluster: str, request: Request, store: MetastoreDep, settings: SettingsDep
) -> list[str] | Response:
    found = await active_brokers(store, settings, cluster)
    if isinstance(found, Redirect):
        location = str(request.url.replace(netloc=found.netloc))
        return Response(status_code=307, headers={"Location": location})
    return found
