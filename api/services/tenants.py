"""Tenants: `/admin/policies/{tenant}` holds its `TenantInfo` (admin roles, allowed clusters).

Rules and reason texts follow `TenantsBase`: the name is checked first (create only), then the
clusters (non-empty, no blanks, all existing), then the admin roles (no outer whitespace), then
existence and the `maxTenants` limit. An update is a full replace that may not drop a cluster
some namespace of the tenant still replicates to. Delete refuses a tenant with namespaces
unless forced, and forcing needs `forceDeleteTenantAllowed` (and, for each namespace,
`forceDeleteNamespaceAllowed`, as the namespaces are force-deleted one by one).
"""

from __future__ import annotations

import builtins

from api.errors import Conflict, NotAllowed, NotFound, PreconditionFailed
from api.naming import require_valid_tenant_name
from api.services.namespaces import NamespaceService
from api.settings import Settings
from api.shapes.models import TenantInfo
from metastore import errors as store_errors
from metastore.repositories import Repositories, newest_version
from metastore.store import Guard, MetadataStore, retry_on_conflict


def normalised(info: TenantInfo) -> TenantInfo:
    """Both fields are Java sets: duplicates collapse, first occurrence keeps its place. A set
    the body did not give stays unset (Jackson leaves it null, and it is not written)."""
    given = {"adminRoles": info.adminRoles, "allowedClusters": info.allowedClusters}
    return TenantInfo(**{name: list(dict.fromkeys(values)) for name, values in given.items()
                         if name in info.model_fields_set})


class TenantService:
    def __init__(self, store: MetadataStore, settings: Settings,
                 namespaces: NamespaceService | None = None) -> None:
        self.store = store
        self.settings = settings
        self.namespaces = namespaces or NamespaceService(store, settings)
        self.docs = Repositories(store)

    async def list(self) -> list[str]:
        return await self.docs.tenants.list()

    async def get(self, tenant: str) -> TenantInfo:
        info = await self.namespaces.tenant_info(tenant)
        if info is None:
            raise NotFound("Tenant does not exist")
        return info

    async def create(self, tenant: str, info: TenantInfo | None) -> None:
        require_valid_tenant_name(tenant)
        await retry_on_conflict(lambda: self._create_once(tenant, info))

    async def _create_once(self, tenant: str, given: TenantInfo | None) -> None:
        """One guarded transaction: the tenant still absent and every allowed cluster still
        at the revision read (a concurrent cluster DELETE fails it)."""
        info = await self._validated(given)
        tenants = self.docs.tenants
        if await tenants.exists(tenant):
            raise Conflict("Tenant already exist")
        limit = self.settings.maxTenants
        if limit > 0 and len(await self.list()) >= limit:
            raise PreconditionFailed("Exceed the maximum number of tenants")
        transaction = self.docs.transaction().require(
            tenants.at(tenant, version=0), *await self._cluster_guards(info)
        )
        try:
            await transaction.put(tenants, tenant, value=info).commit()
        except store_errors.BadVersion:
            if await tenants.exists(tenant):
                raise Conflict("Tenant already exist") from None
            raise

    async def update(self, tenant: str, info: TenantInfo | None) -> None:
        await retry_on_conflict(lambda: self._update_once(tenant, info))

    async def _update_once(self, tenant: str, info: TenantInfo | None) -> None:
        """One transaction guarded by the tenant's revision, by nothing written under it
        since the read (a namespace created meanwhile may use a cluster being removed) and by
        the revisions of its clusters (a cluster DELETE meanwhile fails it)."""
        new = await self._validated(info)
        tenants = self.docs.tenants
        found = await tenants.get(tenant)
        if found is None:
            raise NotFound(f"Tenant {tenant} not found")
        # unreadable: a full overwrite is how an operator repairs it
        old = found.value_or(TenantInfo()) or TenantInfo()
        children = await self.docs.policies.of_tenant(tenant)
        # `canUpdateCluster`: a cluster leaves the list only while no v1 namespace
        # (`tenant/cluster/ns`) lives under it; v2 namespaces that replicate to it do not hold
        # it (as the 4.0.8 broker, whose check lists `/admin/policies/{tenant}/{cluster}`)
        removed = set(old.allowedClusters) - set(new.allowedClusters) - {"global"}
        if any(name.split("/")[0] in removed for name in children if "/" in name):
            raise PreconditionFailed("Active namespaces")
        newest = max(found.version, newest_version(children))
        transaction = self.docs.transaction().require(
            tenants.at(tenant, version=found.version), tenants.subtree(tenant, since=newest),
            *await self._cluster_guards(new),
        )
        await transaction.put(tenants, tenant, value=new).commit()

    async def _cluster_guards(self, info: TenantInfo) -> builtins.list[Guard]:
        """Each allowed cluster still at the revision read now (412 when it is gone)."""
        guards = []
        for cluster in info.allowedClusters:
            found = await self.docs.clusters.get(cluster)
            if found is None:
                raise PreconditionFailed("Clusters do not exist")
            guards.append(self.docs.clusters.at(cluster, version=found.version))
        return guards

    async def delete(self, tenant: str, force: bool) -> None:
        if force:
            if not self.settings.forceDeleteTenantAllowed:
                raise NotAllowed("Broker doesn't allow forced deletion of tenants")
            for name in await self.namespaces.namespaces_of(tenant):
                parts = name.split("/")
                if len(parts) == 2:
                    await self.namespaces.delete(parts[0], parts[1], force=True)
        await retry_on_conflict(lambda: self._delete_once(tenant))

    async def _delete_once(self, tenant: str) -> None:
        """One transaction guarded by the tenant's revision and by nothing having been
        written under it since the read: a namespace created meanwhile fails it, and of two
        DELETEs one wins."""
        tenants = self.docs.tenants
        found = await tenants.get(tenant)
        if found is None:
            raise NotFound("Tenant doesn't exist")
        children = await self.docs.policies.of_tenant(tenant)
        if children:
            raise Conflict("The tenant still has active namespaces")
        newest = max(found.version, newest_version(children))
        await (
            self.docs.transaction()
            .require(tenants.at(tenant, version=found.version),
                     tenants.subtree(tenant, since=newest))
            .delete_tree(tenants, tenant)
            .delete_trees([self.docs.local_policies.tenant_tree(tenant)])
            .commit()
        )  # fmt: skip

    async def _validated(self, info: TenantInfo | None) -> TenantInfo:
        if info is None:
            raise PreconditionFailed("TenantInfo is null")
        if "allowedClusters" not in info.model_fields_set:  # absent or null: TenantInfoImpl's
            raise PreconditionFailed("Clusters cannot be null")
        clusters = info.allowedClusters
        if not clusters or any(not c.strip() for c in clusters):
            raise PreconditionFailed("Clusters cannot be empty or blank")
        existing = set(await self.docs.clusters.list())
        if any(c not in existing for c in clusters):
            raise PreconditionFailed("Clusters do not exist")
        if any(role.strip() != role for role in info.adminRoles):
            raise PreconditionFailed("AdminRoles contains whitespace in the beginning or end.")
        return normalised(info)
