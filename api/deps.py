"""Dependencies routes declare by name: what a route needs reads as its signature.

They are `async def` on purpose: FastAPI runs a plain `def` dependency in a worker thread,
a thread hop per dependency per request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from api.auth.authorization import Access, authorize
from api.auth.client_certificates import client_certificate
from api.change_history import change_context
from api.services.bookkeeper_admin import BookKeeperAdminService
from api.services.changes import ChangeHistoryService
from api.services.clusters import ClusterService
from api.services.isolation import IsolationService
from api.services.lint import LintService
from api.services.lookup import LookupService
from api.services.namespace_policies import NamespacePolicyService
from api.services.namespaces import NamespaceService
from api.services.partitioned_topics import PartitionedTopicService
from api.services.placement import PlacementService
from api.services.rack_import import RackImportService
from api.services.racks import RackService
from api.services.replication import ReplicationService
from api.services.storage_bookies import StorageBookieService
from api.services.tenants import TenantService
from api.services.topics import TopicService
from api.settings import Settings
from api.state import AppState
from metastore.change_history import current_change_context
from metastore.store import MetadataStore


async def authorize_request(request: Request) -> None:
    """The app-wide dependency: every route is authorised by `api.auth.authorization.authorize`,
    by its operation id (a route without one is refused unless the caller is a super-user)."""
    headers = {name.decode("latin-1").lower(): value.decode("latin-1")
               for name, value in request.scope["headers"]}  # fmt: skip
    route = request.scope.get("route")
    operation = getattr(route, "operation_id", None) or ""
    access = Access(
        operation,
        request.path_params,
        headers,
        request.query_params,
        client_certificate(request.scope),
    )
    state = app_state(request)
    request.state.role = role = await authorize(access, state.guard)
    context = change_context(request.scope, role, state.settings)
    if context is not None:  # the route runs in this task: its writes are recorded under it
        current_change_context.set(context)


def app_state(request: Request) -> AppState:
    state: AppState = request.app.state.pulsar
    return state


async def get_settings(request: Request) -> Settings:
    return app_state(request).settings


async def get_store(request: Request) -> MetadataStore:
    return app_state(request).store


async def get_racks(request: Request) -> RackService:
    return app_state(request).services.racks


async def get_rack_import(request: Request) -> RackImportService:
    return app_state(request).services.rack_import


async def get_tenants(request: Request) -> TenantService:
    return app_state(request).services.tenants


async def get_namespaces(request: Request) -> NamespaceService:
    return app_state(request).services.namespaces


async def get_namespace_policies(request: Request) -> NamespacePolicyService:
    return app_state(request).services.namespace_policies


async def get_replication(request: Request) -> ReplicationService:
    state = app_state(request)
    return ReplicationService(state.store, state.settings)


async def get_clusters(request: Request) -> ClusterService:
    return app_state(request).services.clusters


async def get_isolation(request: Request) -> IsolationService:
    return app_state(request).services.isolation


async def get_placement(request: Request) -> PlacementService:
    return app_state(request).services.placement


async def get_lint(request: Request) -> LintService:
    return app_state(request).services.lint


async def get_lookup(request: Request) -> LookupService:
    return app_state(request).services.lookup


async def get_topics(request: Request) -> TopicService:
    return app_state(request).services.topics


async def get_partitioned_topics(request: Request) -> PartitionedTopicService:
    return app_state(request).services.partitioned_topics


SettingsDep = Annotated[Settings, Depends(get_settings)]
MetastoreDep = Annotated[MetadataStore, Depends(get_store)]
RacksDep = Annotated[RackService, Depends(get_racks)]
RackImportDep = Annotated[RackImportService, Depends(get_rack_import)]
TenantsDep = Annotated[TenantService, Depends(get_tenants)]
NamespacesDep = Annotated[NamespaceService, Depends(get_namespaces)]
NamespacePoliciesDep = Annotated[NamespacePolicyService, Depends(get_namespace_policies)]
ReplicationDep = Annotated[ReplicationService, Depends(get_replication)]
ClustersDep = Annotated[ClusterService, Depends(get_clusters)]
IsolationDep = Annotated[IsolationService, Depends(get_isolation)]
PlacementDep = Annotated[PlacementService, Depends(get_placement)]
LintDep = Annotated[LintService, Depends(get_lint)]
LookupDep = Annotated[LookupService, Depends(get_lookup)]
TopicsDep = Annotated[TopicService, Depends(get_topics)]
PartitionedTopicsDep = Annotated[PartitionedTopicService, Depends(get_partitioned_topics)]


async def get_bookkeeper_admin(request: Request) -> BookKeeperAdminService:
    state = app_state(request)
    delay = state.settings.autorecovery.lostBookieRecoveryDelay
    return BookKeeperAdminService(state.versioned_keys, delay)


BookKeeperAdminDep = Annotated[BookKeeperAdminService, Depends(get_bookkeeper_admin)]


async def get_storage_bookies(request: Request) -> StorageBookieService:
    return app_state(request).services.storage_bookies


StorageBookiesDep = Annotated[StorageBookieService, Depends(get_storage_bookies)]


async def get_change_history(request: Request) -> ChangeHistoryService:
    return ChangeHistoryService(app_state(request).store)


ChangeHistoryDep = Annotated[ChangeHistoryService, Depends(get_change_history)]
