"""Tenants: `/admin/policies/{tenant}` holds its `TenantInfo` (admin roles, allowed clusters).

Rules and reason texts follow `TenantsBase`: the name is checked first (create only), then the
clusters (non-empty, no blanks, all existing), then the admin roles (no outer whitespace), then
existence and the `maxTenants` limit. An update is a full replace that may not drop a cluster
some namespace of the tenant still replicates to. Delete refuses a tenant with namespaces
unless forced, and forcing needs `forceDeleteTenantAllowed` (and, for each namespace,
`forceDeleteNamespaceAllowed`, as the namespaces are force-deleted one by one).
"""

from __future__ import annotations

from api.errors import Conflict, NotAllowed, NotFound, PreconditionFailed
from api.models import TenantInfo
from api.services.namespaces import NamespaceService
from api.services.naming import is_valid_name
from api.settings import Settings
from metastore import errors as store_errors
from metastore import paths
from metastore.store import MetadataStore


def normalised(info: TenantInfo) -> TenantInfo:
    """Both fields are Java sets: duplicates collapse, first occurrence keeps its place."""
    return TenantInfo(
        adminRoles=list(dict.fromkeys(info.adminRoles)),
        allowedClusters=list(dict.fromkeys(info.allowedClusters)),
    )


class TenantService:
    def __init__(self, store: MetadataStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.namespaces = NamespaceService(store, settings)

    async def list(self) -> list[str]:
        return await self.store.children(paths.TENANTS)

    async def get(self, tenant: str) -> TenantInfo:
        info = await self.namespaces.tenant_info(tenant)
        if info is None:
            raise NotFound("Tenant does not exist")
        return info

    async def create(self, tenant: str, info: TenantInfo | None) -> None:
        if not is_valid_name(tenant) or not tenant:
            raise PreconditionFailed("Tenant name is not valid")
        info = await self._validated(info)
        if await self.store.exists(paths.tenant(tenant)):
            raise Conflict("Tenant already exist")
        limit = self.settings.maxTenants
        if limit > 0 and len(await self.list()) >= limit:
            raise PreconditionFailed("Exceed the maximum number of tenants")
        try:
            await self.store.create(paths.tenant(tenant), info.to_bytes())
        except store_errors.AlreadyExists as exc:
            raise Conflict("Tenant already exist") from exc

    async def update(self, tenant: str, info: TenantInfo | None) -> None:
        new = await self._validated(info)
        old = await self.namespaces.tenant_info(tenant)
        if old is None:
            raise NotFound(f"Tenant {tenant} not found")
        removed = set(old.allowedClusters) - set(new.allowedClusters) - {"global"}
        if removed:
            policies = await self.namespaces.policies_by_namespace(tenant)
            if any(removed & set(p.replication_clusters) for p in policies.values()):
                raise PreconditionFailed("Active namespaces")

        def replace(current: bytes | None) -> bytes:
            if current is None:
                raise NotFound(f"Tenant {tenant} not found")
            return new.to_bytes()

        await self.store.update(paths.tenant(tenant), replace)

    async def delete(self, tenant: str, force: bool) -> None:
        if force:
            if not self.settings.forceDeleteTenantAllowed:
                raise NotAllowed("Broker doesn't allow forced deletion of tenants")
            for name in await self.namespaces.namespaces_of(tenant):
                parts = name.split("/")
                if len(parts) == 2:
                    await self.namespaces.delete(parts[0], parts[1], force=True)
        if not await self.store.exists(paths.tenant(tenant)):
            raise NotFound("Tenant doesn't exist")
        if await self.namespaces.namespaces_of(tenant):
            raise Conflict("The tenant still has active namespaces")

        def remove(current: bytes | None) -> bytes | None:
            if current is None:
                raise NotFound("Tenant doesn't exist")
            return None

        await self.store.update(paths.tenant(tenant), remove)
        await self.store.delete_tree(paths.join(paths.LOCAL_POLICIES, tenant))

    async def _validated(self, info: TenantInfo | None) -> TenantInfo:
        if info is None:
            raise PreconditionFailed("TenantInfo is null")
        clusters = info.allowedClusters
        if not clusters or any(not c.strip() for c in clusters):
            raise PreconditionFailed("Clusters cannot be empty or blank")
        existing = set(await self.store.children(paths.CLUSTERS))
        if any(c not in existing for c in clusters):
            raise PreconditionFailed("Clusters do not exist")
        if any(role.strip() != role for role in info.adminRoles):
            raise PreconditionFailed("AdminRoles contains whitespace in the beginning or end.")
        return normalised(info)
