"""`/admin/v2/brokers`: registered brokers and the runtime configuration."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import MetastoreDep, SettingsDep
from api.services.brokers import active_brokers

router = APIRouter(prefix="/admin/v2/brokers", tags=["brokers"])


@router.get(
    "/configuration/runtime",
    operation_id="getRuntimeConfiguration",
    summary="Get all runtime configurations (pulsar-admin clusters list reads clusterName)",
    response_model=dict[str, str],
)
async def get_runtime_configuration(settings: SettingsDep) -> dict[str, str]:
    return settings.runtime_configuration()


@router.get(
    "/{cluster}",
    operation_id="getActiveBrokers",
    summary="Get the list of active brokers (web service addresses) in the cluster",
    response_model=list[str],
)
async def get_active_brokers(cluster: str, store: MetastoreDep, settings: SettingsDep) -> list[str]:
    return await active_brokers(store, settings, cluster)
