"""Dependencies routes declare by name: what a route needs reads as its signature."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from api.services.clusters import ClusterService
from api.services.isolation import IsolationService
from api.services.lint import LintService
from api.services.lookup import LookupService
from api.services.namespace_policies import NamespacePolicyService
from api.services.namespaces import NamespaceService
from api.services.placement import PlacementService
from api.services.racks import RackService
from api.services.tenants import TenantService
from api.settings import Settings
from api.state import AppState
from metastore.store import MetadataStore


def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.pulsar
    return state


def get_settings(request: Request) -> Settings:
    return get_state(request).settings


def get_store(request: Request) -> MetadataStore:
    return get_state(request).store


def get_racks(request: Request) -> RackService:
    return get_state(request).racks


def get_tenants(request: Request) -> TenantService:
    return TenantService(get_store(request), get_settings(request))


def get_namespaces(request: Request) -> NamespaceService:
    return NamespaceService(get_store(request), get_settings(request))


def get_namespace_policies(request: Request) -> NamespacePolicyService:
    return NamespacePolicyService(get_store(request), get_settings(request))


def get_clusters(request: Request) -> ClusterService:
    return ClusterService(get_store(request))


def get_isolation(request: Request) -> IsolationService:
    store = get_store(request)
    return IsolationService(store, ClusterService(store))


def get_placement(request: Request) -> PlacementService:
    state = get_state(request)
    return PlacementService(state.store, state.settings, state.topology)


def get_lint(request: Request) -> LintService:
    state = get_state(request)
    return LintService(state.store, state.topology)


def get_lookup(request: Request) -> LookupService:
    state = get_state(request)
    return LookupService(state.store, state.settings, state.broker_watch, state.ownership_watch)


StateDep = Annotated[AppState, Depends(get_state)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
MetastoreDep = Annotated[MetadataStore, Depends(get_store)]
RacksDep = Annotated[RackService, Depends(get_racks)]
TenantsDep = Annotated[TenantService, Depends(get_tenants)]
NamespacesDep = Annotated[NamespaceService, Depends(get_namespaces)]
NamespacePoliciesDep = Annotated[NamespacePolicyService, Depends(get_namespace_policies)]
ClustersDep = Annotated[ClusterService, Depends(get_clusters)]
IsolationDep = Annotated[IsolationService, Depends(get_isolation)]
PlacementDep = Annotated[PlacementService, Depends(get_placement)]
LintDep = Annotated[LintService, Depends(get_lint)]
LookupDep = Annotated[LookupService, Depends(get_lookup)]
