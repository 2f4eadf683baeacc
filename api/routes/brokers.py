"""`/admin/v2/brokers`: registered brokers and the runtime configuration."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from api.auth.secrets import masked_config
from api.deps import MetastoreDep, SettingsDep
from api.services.brokers import Redirect, active_brokers
from api.shapes.params import ClusterName
from api.shapes.responses import BrokerIds, RuntimeConfiguration

router = APIRouter(prefix="/admin/v2/brokers", tags=["brokers"])


@router.get(
    "/configuration/runtime",
    operation_id="getRuntimeConfiguration",
    summary="Get all runtime configurations (pulsar-admin clusters list reads clusterName)",
    response_model=RuntimeConfiguration,
)
async def get_runtime_configuration(settings: SettingsDep) -> dict[str, str]:
    """The broker's effective settings, as `name -> value` strings.

    `pulsar-admin clusters list` reads `clusterName` from here to mark the current cluster.
    """
    return masked_config(settings.runtime_configuration())


@router.get(
    "/{cluster}",
    operation_id="getActiveBrokers",
    summary=(
        "Get the list of active brokers (web service addresses) in the cluster. "
        "If authorization is not enabled, any cluster name is valid."
    ),
    response_model=BrokerIds,
    responses={
        307: {"description": "Current broker doesn't serve this cluster"},
        404: {"description": "Cluster does not exist: cluster={clustername}"},
        412: {"description": "The other cluster has no service URL to redirect to"},
    },
)
async def get_active_brokers(
    cluster: ClusterName, request: Request, store: MetastoreDep, settings: SettingsDep
) -> list[str] | Response:
    """The brokers registered for a cluster, as `host:webServicePort` strings.

    Brokers register under `/loadbalance/brokers` on a lease, so a stopped broker drops out when its
    session ends. For another cluster the answer is a 307 to that cluster's service URL.
    """
    found = await active_brokers(store, settings, cluster)
    if isinstance(found, Redirect):
        location = str(request.url.replace(netloc=found.netloc))
        return Response(status_code=307, headers={"Location": location})
    return found
