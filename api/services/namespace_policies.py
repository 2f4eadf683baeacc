"""Per-namespace placement policies: anti-affinity group, bookie affinity group, persistence.

Anti-affinity and bookie affinity are *local* policies (`/admin/local-policies/{t}/{ns}`,
`LocalPolicies`); persistence is in the global `Policies`. Every write is a compare-and-swap
read-modify-write of the whole document that keeps the fields it does not own, including
fields this service does not model, so concurrent writers of different fields lose nothing.

Strict bookie affinity (an extension, `bookkeeperAffinityGroupStrict`): stored next to the
groups, omitted when false so an upstream broker reading the document sees exactly the two
fields it knows. Strict means "only the primary (then secondary) groups' bookies, never
ungrouped ones, else fail", so it needs a primary group to be strict about: strict with no
primary group, or with the wildcard primary `*` (which disables isolation), is refused with 412.
"""

from __future__ import annotations

from collections.abc import Callable

from api.errors import InvalidInput, NotFound, PreconditionFailed
from api.naming import require_free_name, require_valid_namespace_name
from api.services.clusters import require_cluster
from api.services.namespaces import (
    NAMESPACE_NOT_FOUND,
    NAMESPACE_NOT_OWNED,
    NamespaceService,
    first_local_policies,
    validate_persistence,
)
from api.settings import Settings
from api.shapes.models import BookieAffinityGroupData, LocalPolicies, PersistencePolicies, Policies
from javaformats import java_to_string
from metastore.repositories import Repositories
from metastore.store import MetadataStore, retry_on_conflict
from placement.config import split_groups

LOCAL_POLICIES_NOT_FOUND = "Namespace local-policies does not exist"
EMPTY_ANTI_AFFINITY_GROUP = "antiAffinityGroup can't be empty"
WILDCARD_GROUP = "*"
STRICT_WITHOUT_PRIMARY = (
    "bookkeeperAffinityGroupStrict requires bookkeeperAffinityGroupPrimary: "
    "strict affinity needs at least one primary bookie group"
)
STRICT_WITH_WILDCARD = (
    "bookkeeperAffinityGroupStrict cannot be used with the wildcard primary group '*', "
    "which disables bookie isolation"
)


def validate_bookie_affinity(data: BookieAffinityGroupData) -> None:
    for value in (data.bookkeeperAffinityGroupPrimary, data.bookkeeperAffinityGroupSecondary):
        for group in split_groups(value):
            require_free_name("Bookie group name", group)
    if not data.strict:
        return
    primary = split_groups(data.bookkeeperAffinityGroupPrimary)
    if not primary:
        raise PreconditionFailed(STRICT_WITHOUT_PRIMARY)
    if WILDCARD_GROUP in primary:
        raise PreconditionFailed(STRICT_WITH_WILDCARD)


class NamespacePolicyService:
    def __init__(self, store: MetadataStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.namespaces = NamespaceService(store, settings)
        self.docs = Repositories(store)

    # -- anti-affinity --------------------------------------------------------------------------

    async def anti_affinity_group(self, tenant: str, namespace: str) -> str | None:
        await self.namespaces.policies(tenant, namespace)
        local = await self._local(tenant, namespace)
        return None if local is None else local.namespaceAntiAffinityGroup

    async def set_anti_affinity_group(self, tenant: str, namespace: str, group: str) -> None:
        require_valid_namespace_name(tenant, namespace)
        if not group.strip():
            raise PreconditionFailed(EMPTY_ANTI_AFFINITY_GROUP)
        require_free_name("Anti-affinity group name", group)
        await self.namespaces.policies(tenant, namespace)

        def change(local: LocalPolicies) -> LocalPolicies:
            local.namespaceAntiAffinityGroup = group
            return local

        await self._update_local(tenant, namespace, change, create=True)

    async def remove_anti_affinity_group(self, tenant: str, namespace: str) -> None:
        await self.namespaces.policies(tenant, namespace)

        def change(local: LocalPolicies) -> LocalPolicies:
            local.namespaceAntiAffinityGroup = None
            return local

        await self._update_local(tenant, namespace, change, create=False)

    async def anti_affinity_namespaces(
        self, cluster: str, group: str, tenant: str | None
    ) -> list[str]:
        """Namespaces of `tenant` whose group equals `group`, ignoring case. The cluster is only
        checked for existence (it does not filter), as upstream."""
        if tenant is None:
            raise InvalidInput("Tenant should not be null")
        if not group.strip():
            raise PreconditionFailed("anti-affinity group can't be empty.")
        await require_cluster(self.store, cluster)
        wanted = group.casefold()
        found = []
        for name in await self.namespaces.namespaces_of(tenant):
            owner, rest = name.split("/", 1)
            local = await self.docs.local_policies.get(owner, rest)
            if local is None:
                continue
            stored = local.value.namespaceAntiAffinityGroup
            if stored is not None and stored.casefold() == wanted:
                found.append(name)
        return found

    # -- bookie affinity ----------------------------------------------------------------------

    async def bookie_affinity_group(
        self, tenant: str, namespace: str
    ) -> BookieAffinityGroupData | None:
        await self._require_local_cluster(tenant, namespace)
        local = await self._local(tenant, namespace)
        if local is None:
            raise NotFound(LOCAL_POLICIES_NOT_FOUND)
        return local.bookieAffinityGroup

    async def set_bookie_affinity_group(
        self, tenant: str, namespace: str, data: BookieAffinityGroupData
    ) -> None:
        require_valid_namespace_name(tenant, namespace)
        validate_bookie_affinity(data)
        await self._require_local_cluster(tenant, namespace)
        stored = BookieAffinityGroupData.model_validate(data.dump())

        def change(local: LocalPolicies) -> LocalPolicies:
            local.bookieAffinityGroup = stored
            return local

        await self._update_local(tenant, namespace, change, create=True)

    async def delete_bookie_affinity_group(self, tenant: str, namespace: str) -> None:
        await self._require_local_cluster(tenant, namespace)

        def change(local: LocalPolicies) -> LocalPolicies:
            local.bookieAffinityGroup = None
            return local

        # the broker's `setLocalPoliciesWithCreate`: a namespace without local policies gets
        # them (its bundles, no group), so the next GET reads 204, not 404
        await self._update_local(tenant, namespace, change, create=True)

    async def _require_local_cluster(self, tenant: str, namespace: str) -> Policies:
        """Pulsar's `validateGlobalNamespaceOwnership`: the namespace must exist (404
        `Namespace not found`, its words there, whether the tenant exists or not) and
        replicate to us."""
        policies = await self.namespaces.policies(tenant, namespace, NAMESPACE_NOT_OWNED)
        local_cluster = self.settings.clusterName
        name = f"{tenant}/{namespace}"
        clusters = policies.replication_clusters
        if not clusters:
            raise PreconditionFailed(
                "Namespace does not have any clusters configured : "
                f"local_cluster={local_cluster} ns={name}"
            )
        if local_cluster not in clusters:
            raise PreconditionFailed(
                "Namespace missing local cluster name in clusters list: "
                f"local_cluster={local_cluster} ns={name} clusters={java_to_string(clusters)}"
            )
        return policies

    # -- persistence --------------------------------------------------------------------------

    async def persistence(self, tenant: str, namespace: str) -> PersistencePolicies | None:
        return (await self.namespaces.policies(tenant, namespace)).persistence

    async def set_persistence(
        self, tenant: str, namespace: str, persistence: PersistencePolicies | None
    ) -> None:
        require_valid_namespace_name(tenant, namespace)
        validate_persistence(persistence, self.settings)
        await self._update_policies(tenant, namespace, persistence)

    async def delete_persistence(self, tenant: str, namespace: str) -> None:
        require_valid_namespace_name(tenant, namespace)
        await self._update_policies(tenant, namespace, None)

    async def _update_policies(
        self, tenant: str, namespace: str, persistence: PersistencePolicies | None
    ) -> None:
        def change(policies: Policies | None) -> Policies:
            if policies is None:
                raise NotFound(NAMESPACE_NOT_FOUND)
            policies.persistence = persistence
            return policies

        await self.docs.policies.update(tenant, namespace, mutate=change)

    # -- local policies document ----------------------------------------------------------------

    async def _local(self, tenant: str, namespace: str) -> LocalPolicies | None:
        found = await self.docs.local_policies.get(tenant, namespace)
        return None if found is None else found.value

    async def _update_local(
        self,
        tenant: str,
        namespace: str,
        change: Callable[[LocalPolicies], LocalPolicies],
        *,
        create: bool,
    ) -> None:
        """CAS update of the local policies; with `create=False` an absent document stays
        absent (clearing a field that was never set writes nothing)."""

        async def attempt() -> None:
            """One transaction guarded by the namespace's revision too: a write racing a
            namespace DELETE either lands first (and is deleted with it) or fails, never
            leaving local policies behind the deleted namespace."""
            docs = self.docs
            owner = await docs.policies.get(tenant, namespace)
            if owner is None:
                raise NotFound(NAMESPACE_NOT_FOUND)
            found = await docs.local_policies.get(tenant, namespace)
            if found is None and not create:
                return
            local = found.value if found is not None else first_local_policies(owner.value)
            version = 0 if found is None else found.version
            await (
                docs.transaction()
                .require(docs.policies.at(tenant, namespace, version=owner.version),
                         docs.local_policies.at(tenant, namespace, version=version))
                .put(docs.local_policies, tenant, namespace, value=change(local))
                .commit()
            )  # fmt: skip

        await retry_on_conflict(attempt)
