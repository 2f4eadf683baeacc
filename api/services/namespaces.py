"""Namespaces: create, list, read and delete `/admin/policies/{tenant}/{namespace}`.

A namespace is its global `Policies` document. Creation fills Pulsar's defaults
(`replication_clusters` = [clusterName], `defaultNumberOfNamespaceBundles` equal bundles) and
validates like `NamespacesBase.validatePolicies`. Local policies are NOT created here: Pulsar
creates them lazily, on the first per-cluster write or the first time a broker loads the
namespace's bundles (`load_bundles`), so bookie-affinity GET on a fresh namespace answers 404
`Namespace local-policies does not exist`, as upstream does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from api.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotAllowed,
    NotFound,
    PreconditionFailed,
)
from api.naming import (
    is_system_topic,
    require_valid_namespace_name,
    require_valid_tenant_name,
)
from api.settings import Settings
from api.shapes.models import (
    BundlesData,
    LocalPolicies,
    PersistencePolicies,
    Policies,
    TenantInfo,
)
from javaformats import decode_java_long
from metastore import errors as store_errors
from metastore.repositories import Repositories, ownership_tree
from metastore.store import Guard, MetadataStore, retry_on_conflict
from storage.managed_ledger import codec_decode

NAMESPACE_NOT_FOUND = "Namespace does not exist"
# The 404 of Pulsar's global-ownership check (`checkLocalOrGetPeerReplicationCluster`), which
# lookup, unload, topic creation and bookie affinity run first.
NAMESPACE_NOT_OWNED = "Namespace not found"
GLOBAL_CLUSTER = "global"

FULL_RANGE = 1 << 32
MAX_BUNDLES = FULL_RANGE
# Pulsar accepts up to 2^32 bundles; materialising that many boundaries would exhaust memory,
# so this service refuses more than this many (a deliberate, documented departure).
SUPPORTED_MAX_BUNDLES = 1 << 16
INVALID_BUNDLES = (
    "Invalid number of bundles. Number of numbles has to be in the range of (0, 2^32]."
)

def first_local_policies(policies: Policies) -> LocalPolicies:
    """The local policies a namespace gets when it has none: its policies' bundles (one over
    the whole range when they hold none, as Pulsar's `Policies` defaults them), nothing
    else (`NamespaceBundleFactory.copyToLocalPolicies`, `setLocalPoliciesWithCreate`)."""
    return LocalPolicies() if policies.bundles is None else LocalPolicies(bundles=policies.bundles)


def namespace_missing_for_delete(tenant: str, namespace: str) -> str:
    """A DELETE's 404 words: `precheckWhenDeleteNamespace` names the namespace."""
    return f"Namespace {tenant}/{namespace} does not exist."


def bundles_for(num_bundles: int) -> BundlesData:
    """`num_bundles` equal hash ranges, boundaries written as Pulsar writes them."""
    if num_bundles <= 0 or num_bundles > MAX_BUNDLES:
        raise InvalidInput(INVALID_BUNDLES)
    if num_bundles > SUPPORTED_MAX_BUNDLES:
        raise InvalidInput(
            f"Invalid number of bundles. This service supports at most "
            f"{SUPPORTED_MAX_BUNDLES} bundles per namespace."
        )
    step = FULL_RANGE // num_bundles
    boundaries = [f"0x{i * step:08x}" for i in range(num_bundles)] + [f"0x{FULL_RANGE - 1:08x}"]
    return BundlesData(boundaries=boundaries, numBundles=num_bundles)


def validated_bundles(given: BundlesData) -> BundlesData:
    """Explicit boundaries: normalised, de-duplicated, sorted, covering the whole range."""
    try:
        points = sorted({decode_java_long(b) for b in given.boundaries or []})
    except ValueError as exc:
        raise InvalidInput(f"Invalid bundle boundaries: {given.boundaries}") from exc
    formatted = [f"0x{p:08x}" for p in points]
    if points[0] != 0 or points[-1] != FULL_RANGE - 1:
        raise InvalidInput(
            "Input bundles do not cover the whole hash range. "
            f"first:{formatted[0]}, last:{formatted[-1]}"
        )
    return BundlesData(boundaries=formatted, numBundles=len(formatted) - 1)


def validate_persistence(policies: PersistencePolicies | None, settings: Settings) -> None:
    """`AdminResource.validatePersistencePolicies` (all 400)."""
    if policies is None:
        raise InvalidInput("persistence policies should not be null")
    e, w, a = (
        policies.bookkeeperEnsemble,
        policies.bookkeeperWriteQuorum,
        policies.bookkeeperAckQuorum,
    )
    for value, bound, label in (
        (e, settings.managedLedgerMaxEnsembleSize, "Bookkeeper-Ensemble"),
        (w, settings.managedLedgerMaxWriteQuorum, "Bookkeeper-WriteQuorum"),
        (a, settings.managedLedgerMaxAckQuorum, "Bookkeeper-AckQuorum"),
    ):
        if not 0 < value <= bound:
            raise InvalidInput(f"{label} must be <= {bound} and > 0.")
    if not e >= w >= a:
        raise InvalidInput(f"Bookkeeper Ensemble ({e}) >= WriteQuorum ({w}) >= AckQuorum ({a})")


def validate_retention(retention: dict[str, Any] | None) -> None:
    if retention is None:
        return
    size = retention.get("retentionSizeInMB", 0)
    minutes = retention.get("retentionTimeInMinutes", 0)
    if not isinstance(size, int) or not isinstance(minutes, int):
        raise InvalidInput("Invalid retention policy: limits must be integers")
    if size < -1:
        raise InvalidInput("Invalid retention policy: size limit must be >= -1")
    if minutes < -1:
        raise InvalidInput("Invalid retention policy: time limit must be >= -1")
    if (minutes == 0) != (size == 0):
        raise InvalidInput(
            "Invalid retention policy: Setting a single time or size limit to 0 is invalid when "
            "one of the limits has a non-zero value. Use the value of -1 instead of 0 to ignore a "
            "specific limit. To disable retention both limits must be set to 0."
        )


TOPIC_DOMAINS = ("persistent", "non-persistent")


# Deletes one topic (its managed ledger name) with everything it holds: its ledgers, and its
# managed ledger wherever it is open (`ManagedLedgerFactory.delete`).
TopicRemover = Callable[[str], Awaitable[None]]


class NamespaceService:
    def __init__(self, store: MetadataStore, settings: Settings,
                 remove_topic: TopicRemover | None = None) -> None:
        self.store = store
        self.settings = settings
        self.remove_topic = remove_topic
        self.docs = Repositories(store)

    # -- reads --------------------------------------------------------------------------------

    async def tenant_info(self, tenant: str) -> TenantInfo | None:
        found = await self.docs.tenants.get(tenant)
        return None if found is None else found.value

    async def namespaces_of(self, tenant: str) -> list[str]:
        return sorted(f"{tenant}/{name}" for name in await self.docs.policies.of_tenant(tenant))

    async def policies_by_namespace(self, tenant: str) -> dict[str, Policies]:
        """Every namespace of `tenant` with its policies (unreadable documents are skipped)."""
        found: dict[str, Policies] = {}
        for name, stored in (await self.docs.policies.of_tenant(tenant)).items():
            policies = stored.value_or(None)
            if policies is not None:
                found[f"{tenant}/{name}"] = policies
        return found

    async def list(self, tenant: str) -> list[str]:
        require_valid_tenant_name(tenant)  # `getTenantNamespaces` checks the name first
        if await self.tenant_info(tenant) is None:
            raise NotFound("Tenant not found")
        return await self.namespaces_of(tenant)

    async def policies(self, tenant: str, namespace: str,
                       missing: str = NAMESPACE_NOT_FOUND) -> Policies:
        """The namespace's policies; 404 `missing` when it does not exist (its tenant either):
        `NAMESPACE_NOT_OWNED` where Pulsar's global-ownership check reads them."""
        require_valid_namespace_name(tenant, namespace)
        found = await self.docs.policies.get(tenant, namespace)
        if found is None:
            raise NotFound(missing)
        return found.value

    async def load_bundles(self, tenant: str, namespace: str) -> LocalPolicies | None:
        """What a broker's first load of the namespace's bundles leaves in the store
        (`NamespaceBundleFactory`, reached by every check of a topic's ownership: a lookup,
        creating, deleting or reading a topic, ...): a namespace without local policies gets
        them, holding the bundles of its policies (`copyToLocalPolicies`), so its bookie
        affinity reads as unset (204) afterwards, not as missing (404). Returns the local
        policies as placement reads them (None when the namespace is gone): one cached read
        when they exist; created only if absent, guarded by the namespace's version (never
        left behind a namespace deleted meanwhile)."""
        docs = self.docs
        local = await docs.local_policies.read_placement(tenant, namespace, cached=True)
        if local is not None:
            return local

        async def attempt() -> None:
            owner = await docs.policies.get(tenant, namespace)
            if owner is None or await docs.local_policies.exists(tenant, namespace):
                return
            await (
                docs.transaction()
                .require(docs.policies.at(tenant, namespace, version=owner.version),
                         docs.local_policies.at(tenant, namespace, version=0))
                .put(docs.local_policies, tenant, namespace,
                     value=first_local_policies(owner.value))
                .commit()
            )  # fmt: skip

        await retry_on_conflict(attempt)
        return await docs.local_policies.read_placement(tenant, namespace, cached=True)

    async def shown_policies(self, tenant: str, namespace: str) -> Policies:
        """The policies as `GET /admin/v2/namespaces/{tenant}/{namespace}` answers them: an
        unset `is_allow_auto_update_schema` shows the broker's `isAllowAutoUpdateSchemaEnabled`,
        as Pulsar's `getNamespacePoliciesAsync` fills it in (nothing is written)."""
        policies = await self.policies(tenant, namespace)
        if policies.is_allow_auto_update_schema is None:
            allowed = self.settings.isAllowAutoUpdateSchemaEnabled
            policies = policies.model_copy(update={"is_allow_auto_update_schema": allowed})
        return policies

    # -- create -------------------------------------------------------------------------------

    async def create(self, tenant: str, namespace: str, requested: Policies | None) -> Policies:
        require_valid_namespace_name(tenant, namespace)
        return await retry_on_conflict(lambda: self._create_once(tenant, namespace, requested))

    async def _create_once(
        self, tenant: str, namespace: str, requested: Policies | None
    ) -> Policies:
        """One guarded transaction: the tenant is still at the revision read (a concurrent
        tenant DELETE fails it) and the namespace still absent."""
        docs = self.docs
        found = await docs.tenants.get(tenant)
        if found is None:
            raise NotFound("Tenant does not exist")
        tenant_info = found.value
        policies = self.with_defaults(tenant, tenant_info, requested or Policies())
        limit = self.settings.maxNamespacesPerTenant
        if limit > 0 and len(await self.namespaces_of(tenant)) >= limit:
            raise PreconditionFailed(f"Exceed the maximum number of namespace in tenant :{tenant}")
        try:
            await (
                docs.transaction()
                .require(docs.tenants.at(tenant, version=found.version),
                         docs.policies.at(tenant, namespace, version=0))
                .put(docs.policies, tenant, namespace, value=policies)
                .commit()
            )  # fmt: skip
        except store_errors.BadVersion:
            if await docs.policies.exists(tenant, namespace):
                raise Conflict("Namespace already exists") from None
            raise  # the tenant changed: read it again
        return policies

    def with_defaults(self, tenant: str, tenant_info: TenantInfo, given: Policies) -> Policies:
        """`validatePolicies`: defaults filled in, each rule in upstream's order."""
        policies = given.model_copy(deep=True)
        clusters = list(dict.fromkeys(policies.replication_clusters))
        policies.replication_clusters = clusters or [self.settings.clusterName]
        for cluster in policies.replication_clusters:
            if cluster != GLOBAL_CLUSTER and cluster not in tenant_info.allowedClusters:
                raise Forbidden(
                    f"Cluster [{cluster}] is not in the list of allowed clusters list "
                    f"for tenant [{tenant}]"
                )
        ttl = (policies.model_extra or {}).get("message_ttl_in_seconds")
        if isinstance(ttl, int) and ttl < 0:
            raise PreconditionFailed("Invalid value for message TTL")
        bundles = policies.bundles
        if bundles is not None and bundles.numBundles > 0:
            policies.bundles = (
                validated_bundles(bundles)
                if bundles.boundaries
                else bundles_for(bundles.numBundles)
            )
        else:
            policies.bundles = bundles_for(self.settings.defaultNumberOfNamespaceBundles)
        if policies.persistence is not None:
            validate_persistence(policies.persistence, self.settings)
        validate_retention(policies.retention_policies)
        return policies

    # -- delete -------------------------------------------------------------------------------

    async def delete(self, tenant: str, namespace: str, force: bool) -> None:
        """`internalDeleteNamespaceAsync`: the policies are marked `deleted` first, so no
        topic is created in the namespace from then on (`storage.engine`'s guarded create);
        then its topics (forced, all; else its system topics, the only ones it may hold) are
        deleted with their ledgers; then the documents go."""
        require_valid_namespace_name(tenant, namespace)
        if force and not self.settings.forceDeleteNamespaceAllowed:
            raise NotAllowed("Broker doesn't allow forced deletion of namespaces")
        marked = await retry_on_conflict(lambda: self._mark_deleted(tenant, namespace, force))
        try:
            if self.remove_topic is not None:  # forced: every topic; else the system ones
                for topic in await self.docs.topics.persistent(tenant, namespace):
                    if force or is_system_topic(tenant, namespace, codec_decode(topic)):
                        await self.remove_topic(f"{tenant}/{namespace}/persistent/{topic}")
            await retry_on_conflict(lambda: self._delete_once(tenant, namespace, force))
        except BaseException:
            if marked:  # refused or failed half-way: the namespace stays usable
                await retry_on_conflict(lambda: self._set_deleted(tenant, namespace, False))
            raise

    async def _mark_deleted(self, tenant: str, namespace: str, force: bool) -> bool:
        """Set Pulsar's `Policies.deleted`; not forced, only while the namespace has no
        topic (guarded: a topic created since the check fails the write). Whether this call
        set it (False: a delete in progress had)."""
        docs = self.docs
        found = await docs.policies.get(tenant, namespace)
        if found is None:
            raise NotFound(namespace_missing_for_delete(tenant, namespace))
        # another tool's broken document: no mark; the delete still goes on, so an operator
        # can repair it
        policies = found.value_or(None)
        transaction = docs.transaction().require(
            docs.policies.at(tenant, namespace, version=found.version))
        if not force:
            transaction.require(*await self._only_system_topics(tenant, namespace,
                                                                found.version))
        if policies is None or policies.deleted:
            return False
        marked = policies.model_copy(update={"deleted": True})
        await transaction.put(docs.policies, tenant, namespace, value=marked).commit()
        return True

    async def _set_deleted(self, tenant: str, namespace: str, deleted: bool) -> None:
        docs = self.docs
        found = await docs.policies.get(tenant, namespace)
        if found is None:
            return
        policies = found.value
        if policies.deleted != deleted:
            await (
                docs.transaction()
                .require(docs.policies.at(tenant, namespace, version=found.version))
                .put(docs.policies, tenant, namespace,
                     value=policies.model_copy(update={"deleted": deleted}))
                .commit()
            )  # fmt: skip

    async def _delete_once(self, tenant: str, namespace: str, force: bool) -> None:
        """One transaction deletes the policies, the local policies and the bundle ownership
        records (and, forced, the topics), guarded by the revision of the policies read: of
        two DELETEs exactly one wins, and a write of the local policies (guarded by the same
        revision) either lands before, and is deleted with it, or fails after."""
        docs = self.docs
        found = await docs.policies.get(tenant, namespace)
        if found is None:
            raise NotFound(namespace_missing_for_delete(tenant, namespace))
        transaction = docs.transaction().require(
            docs.policies.at(tenant, namespace, version=found.version))
        if not force:
            transaction.require(*await self._only_system_topics(tenant, namespace,
                                                                found.version))
        await (
            transaction.delete_tree(docs.policies, tenant, namespace)
            .delete_tree(docs.local_policies, tenant, namespace)
            .delete_trees([ownership_tree(tenant, namespace)])
            .delete_trees(docs.topics.trees(tenant, namespace))  # forced, or system topics
            .commit()
        )

    async def _only_system_topics(self, tenant: str, namespace: str, since: int) -> Sequence[Guard]:
        """409 `Cannot delete non empty namespace` unless every topic of the namespace is a
        system topic (`is_system_topic`: a topic-policies `__change_events`, a
        transaction-internal one, ...), which a DELETE takes with it, as the broker's
        `internalDeleteNamespaceAsync` (`hasNonSystemTopic`); then the guards that fail the
        commit if a topic is written after this read (or after `since`)."""
        names, newest = await self.docs.topics.read(tenant, namespace)
        if any(not is_system_topic(tenant, namespace, codec_decode(name)) for name in names):
            raise Conflict("Cannot delete non empty namespace")
        return self.docs.topics.none_since(tenant, namespace, max(since, newest))
