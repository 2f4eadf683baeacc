"""The repositories of Pulsar's admin documents and registrations, one per document kind
(DESIGN.md section 3): paths are built here only, each document reads and writes through its
one model (`metastore.models`, or a tolerant view in `metastore.documents`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from metastore import paths
from metastore.codec import dump_json, load_stored
from metastore.documents import (
    BrokerRegistration,
    RackConfig,
    Registrations,
    decode_broker,
    decode_rack_config,
    registrations_of,
)
from metastore.errors import ContentDeserializationError, MetastoreError
from metastore.models import (
    ClusterData,
    FailureDomain,
    LocalPolicies,
    PartitionedTopicMetadata,
    Policies,
    PulsarModel,
    TenantInfo,
)
from metastore.repositories.base import Document, Stored
from metastore.store import Guard, MetadataStore, Versioned

# `{policyName: NamespaceIsolationData}`, each policy kept as stored (unknown fields survive).
IsolationPolicies = dict[str, Any]


def _bytes_of(value: PulsarModel) -> bytes:
    return value.to_bytes()


def read_isolation_policies(path: str, raw: bytes) -> IsolationPolicies:
    """A cluster's namespace isolation policies; JSON that is not a map reads as none, bytes
    that are not JSON are `ContentDeserializationError`."""
    document = load_stored(path, raw)
    return document if isinstance(document, dict) else {}


class Tenants(Document[TenantInfo]):
    """`/admin/policies/{tenant}`: `TenantInfo`."""

    kind = "tenant"

    def __init__(self, store: MetadataStore) -> None:
        super().__init__(store, paths.tenant, TenantInfo.from_stored, _bytes_of,
                         parent=lambda: paths.TENANTS)  # fmt: skip

    async def list(self) -> list[str]:
        return await self.names()

    def subtree(self, tenant: str, *, since: int) -> Guard:
        """Holds while nothing under the tenant (its namespaces) was written after `since`."""
        return Guard(self.path(tenant), since, tree=True)

    def every_namespace(self, *, since: int) -> Guard:
        """Holds while no tenant or namespace document was written after `since`."""
        return Guard(paths.TENANTS, since, tree=True)

    async def everything(self) -> dict[str, Stored[Any]]:
        """Every document under `/admin/policies/` (tenants, namespaces, v1 namespaces), by
        its name below the root (`tenant`, `tenant/ns`, `tenant/cluster/ns`), undecoded
        (`Stored.value` is the parsed JSON)."""
        root = paths.TENANTS + "/"
        found = await self.store.get_children_values(paths.TENANTS)
        return {key.removeprefix(root): Stored(held.revision, held.value, key, load_stored)
                for key, held in found.items()}  # fmt: skip


class NamespacePolicies(Document[Policies]):
    """`/admin/policies/{tenant}/{namespace}` (and v1 `{tenant}/{cluster}/{namespace}`):
    `Policies`, read strictly (the API's view); `read_placement` is the tolerant reading side
    placement uses."""

    kind = "policies"

    def __init__(self, store: MetadataStore) -> None:
        super().__init__(store, paths.namespace, Policies.from_stored, _bytes_of,
                         parent=paths.tenant)  # fmt: skip

    async def of_tenant(self, tenant: str) -> dict[str, Stored[Policies]]:
        """The namespaces of `tenant` by name below it (`ns`, or v1 `cluster/ns`)."""
        root = paths.tenant(tenant) + "/"
        found = await self.store.get_children_values(paths.tenant(tenant))
        out: dict[str, Stored[Policies]] = {}
        for key, held in found.items():
            parts = key.removeprefix(root).split("/")
            if 1 <= len(parts) <= 2 and all(parts):
                out["/".join(parts)] = self.stored(key, held)
        return out

    async def read_placement(
        self, tenant: str, namespace: str, *, cached: bool = False
    ) -> Policies | None:
        """The policies as placement reads them (`Policies.read`); None when absent. With
        `cached`, from the watch-fed cache when it holds them (`Document.get_cached`)."""
        found = await (self.get_cached if cached else self.get)(tenant, namespace)
        return None if found is None else Policies.read(found.path, found.raw)


class NamespaceLocalPolicies(Document[LocalPolicies]):
    """`/admin/local-policies/{tenant}/{namespace}`: `LocalPolicies`. `get` reads strictly
    (the API's view); `read_placement` and `all_for_placement` are the tolerant side."""

    kind = "local-policies"

    def __init__(self, store: MetadataStore) -> None:
        super().__init__(store, paths.local_policies, LocalPolicies.from_stored, _bytes_of,
                         parent=lambda t: paths.join(paths.LOCAL_POLICIES, t))  # fmt: skip

    def tenant_tree(self, tenant: str) -> str:
        """The local policies of every namespace of `tenant` (`Transaction.delete_trees`)."""
        return paths.join(paths.LOCAL_POLICIES, tenant)

    async def read_placement(
        self, tenant: str, namespace: str, *, cached: bool = False
    ) -> LocalPolicies | None:
        """The local policies as placement reads them (`LocalPolicies.read`); None when the
        namespace has none. With `cached`, from the watch-fed cache when it holds them."""
        found = await (self.get_cached if cached else self.get)(tenant, namespace)
        return None if found is None else LocalPolicies.read(found.path, found.raw)

    async def all_for_placement(self) -> dict[str, LocalPolicies]:
        """Every namespace's local policies by `tenant/namespace`; unreadable ones are
        skipped."""
        root = paths.LOCAL_POLICIES + "/"
        out: dict[str, LocalPolicies] = {}
        for key, held in (await self.store.get_children_values(paths.LOCAL_POLICIES)).items():
            name = key.removeprefix(root)
            if name.count("/") != 1:
                continue
            try:
                out[name] = LocalPolicies.read(key, held.value)
            except ContentDeserializationError:
                continue
        return out


class Clusters(Document[ClusterData]):
    """`/admin/clusters/{cluster}`: `ClusterData`."""

    kind = "cluster"

    def __init__(self, store: MetadataStore) -> None:
        super().__init__(store, paths.cluster, ClusterData.from_stored, _bytes_of,
                         parent=lambda: paths.CLUSTERS)  # fmt: skip

    async def list(self) -> list[str]:
        return await self.names()

    async def create_raw(self, cluster: str, value: bytes) -> int:
        """Create the record with bytes given as they are (`initialize-cluster-metadata`
        writes Pulsar's own serialisation)."""
        return await self.store.create(self.path(cluster), value)


class FailureDomains(Document[FailureDomain]):
    """`/admin/clusters/{cluster}/failureDomain/{domain}`: `FailureDomain`."""

    kind = "failure-domain"

    def __init__(self, store: MetadataStore) -> None:
        super().__init__(store, paths.failure_domain, FailureDomain.from_stored, _bytes_of,
                         parent=paths.failure_domains)  # fmt: skip


class NamespaceIsolation(Document[IsolationPolicies]):
    """`/admin/clusters/{cluster}/namespaceIsolationPolicies`: `{name: NamespaceIsolationData}`
    as stored (written with its keys in the order given)."""

    kind = "namespace-isolation-policies"

    def __init__(self, store: MetadataStore) -> None:
        super().__init__(store, paths.namespace_isolation_policies, read_isolation_policies,
                         dump_json)  # fmt: skip


class RackConfiguration:
    """`/bookies`: `BookiesRackConfiguration`, read tolerantly (`decode_rack_config`)."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    path = paths.BOOKIES_RACK_CONFIG

    async def get(self) -> Stored[RackConfig] | None:
        found = await self.store.get(self.path)
        if found is None:
            return None
        return Stored(found.revision, found.value, self.path, _read_rack_config)

    async def update(
        self,
        change: Callable[[Any], Any],
        finalize: Callable[[Any], Any] | None = None,
    ) -> Stored[RackConfig] | None:
        """Compare-and-swap on the parsed document (`MetadataStore.update_json`: a batch of
        concurrent changes parses and serialises once): `change(doc)` returns the new
        document or UNCHANGED; `finalize` runs once before serialising."""
        found = await self.store.update_json(self.path, change, finalize)
        return None if found is None else Stored(
            found.revision, found.value, self.path, _read_rack_config)  # fmt: skip

    async def put(self, config: RackConfig, *, expected_version: int) -> int:
        return await self.store.put(self.path, dump_json(config), expected_version)


def _read_rack_config(path: str, raw: bytes) -> RackConfig:
    return decode_rack_config(raw)


class BookieRegistrations:
    """`/ledgers/available/{bookieId}` (read-only: `/ledgers/available/readonly/{bookieId}`):
    a bookie's registration (its `BookieServiceInfo`, `metastore.bookie_service_info`)."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    @staticmethod
    def path(bookie_id: str, *, readonly: bool) -> str:
        return paths.bookie_readonly(bookie_id) if readonly else paths.bookie_available(bookie_id)

    async def get(self, bookie_id: str, *, readonly: bool) -> bytes | None:
        found = await self.store.get(self.path(bookie_id, readonly=readonly))
        return None if found is None else found.value

    async def exists(self, bookie_id: str, *, readonly: bool | None = None) -> bool:
        """Registered (as writable, as read-only, or with `readonly=None` as either)."""
        if readonly is not None:
            return await self.store.exists(self.path(bookie_id, readonly=readonly))
        return await self.exists(bookie_id, readonly=False) or await self.exists(
            bookie_id, readonly=True)  # fmt: skip

    async def delete(self, bookie_id: str, *, readonly: bool) -> None:
        await self.store.delete(self.path(bookie_id, readonly=readonly))

    async def put_ephemeral(
        self, bookie_id: str, value: bytes, *, readonly: bool, lease: int
    ) -> None:
        await self.store.put_ephemeral(self.path(bookie_id, readonly=readonly), value, lease)

    async def names(self, *, readonly: bool) -> list[str]:
        """The ids registered writable (`readonly=False`) or read-only, sorted."""
        if readonly:
            return await self.store.children(paths.BOOKIES_READONLY)
        return [b for b in await self.store.children(paths.BOOKIES_AVAILABLE) if b != "readonly"]

    async def revoke(self, bookie_id: str) -> None:
        """End the sessions (leases) the bookie's registrations are on: they vanish now, as
        when the bookie's session expires. A registration already gone is no error."""
        for readonly in (False, True):
            with contextlib.suppress(MetastoreError):
                lease = await self.store.lease_of(self.path(bookie_id, readonly=readonly))
                if lease is not None:
                    await self.store.revoke_lease(lease)

    async def all(self) -> Registrations:
        """The registered bookies, writable and read-only."""
        return registrations_of(await self.store.get_children_values(paths.BOOKIES_AVAILABLE))

    async def with_cookies(self) -> list[str]:
        """Every bookie with a cookie (`/ledgers/cookies/{bookieId}`), running or not: what
        BookKeeper's registration client answers for `getAllBookies`."""
        return await self.store.children(paths.BOOKIE_COOKIES)

    async def ids(self) -> set[str]:
        """Every registered bookie id, writable or read-only (one listing each)."""
        found = set(await self.store.children(paths.BOOKIES_AVAILABLE))
        found |= set(await self.store.children(paths.BOOKIES_READONLY))
        found.discard("readonly")
        return found


class BrokerRegistrations:
    """`/loadbalance/brokers/{brokerId}`: `LocalBrokerData`, read tolerantly."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    async def get(self, broker_id: str) -> BrokerRegistration | None:
        found = await self.store.get(paths.broker(broker_id))
        return None if found is None else decode_broker(broker_id, found.value)

    async def all(self) -> dict[str, BrokerRegistration]:
        return self.decoded(await self.store.get_children_values(paths.BROKERS))

    @staticmethod
    def decoded(entries: Mapping[str, Versioned]) -> dict[str, BrokerRegistration]:
        """The registrations among `entries` (keys under `/loadbalance/brokers/`, e.g. a
        watch-fed cache's), by broker id."""
        prefix = paths.BROKERS + "/"
        return {key.removeprefix(prefix): decode_broker(key.removeprefix(prefix), held.value)
                for key, held in entries.items()
                if key.startswith(prefix) and "/" not in key.removeprefix(prefix)}  # fmt: skip


class PartitionedTopics(Document[PartitionedTopicMetadata]):
    """`/admin/partitioned-topics/{tenant}/{ns}/persistent/{topic}`: a persistent partitioned
    topic's `PartitionedTopicMetadata`, keyed by tenant, namespace and the URL-encoded local
    name (as its partitions' managed ledgers are named)."""

    kind = "partitioned topic"

    def __init__(self, store: MetadataStore) -> None:
        super().__init__(store, paths.partitioned_topic, PartitionedTopicMetadata.from_stored,
                         _bytes_of, parent=paths.partitioned_topics)  # fmt: skip


class NamespaceTopics:
    """Where a namespace's topics live: its managed ledgers and partitioned-topic metadata,
    persistent and non-persistent (read to refuse deleting a non-empty namespace)."""

    DOMAINS = ("persistent", "non-persistent")

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    def _roots(self, tenant: str, namespace: str) -> list[str]:
        return [paths.join(root, tenant, namespace, domain)
                for root in (paths.MANAGED_LEDGERS, paths.PARTITIONED_TOPICS)
                for domain in self.DOMAINS]  # fmt: skip

    async def persistent(self, tenant: str, namespace: str) -> list[str]:
        """The URL-encoded names of the namespace's persistent topics (managed ledgers)."""
        return await self.store.children(
            paths.join(paths.MANAGED_LEDGERS, tenant, namespace, "persistent"))  # fmt: skip

    async def exists(self, managed_ledger: str) -> bool:
        """Whether the topic's managed-ledger record exists (`managed_ledger`: its name,
        `tenant/ns/persistent/<URL-encoded topic>`)."""
        return await self.store.exists(f"{paths.MANAGED_LEDGERS}/{managed_ledger}")

    async def partitions(self, tenant: str, namespace: str, encoded_topic: str) -> int:
        """The partition count of the persistent partitioned topic (`encoded_topic`, its
        URL-encoded local name) as its `PartitionedTopicMetadata` holds it; 0 when there is no
        such topic (or its metadata holds no count)."""
        found = await self.store.get(paths.partitioned_topic(tenant, namespace, encoded_topic))
        return 0 if found is None else PartitionedTopicMetadata.count_in(found.value)

    async def read(self, tenant: str, namespace: str) -> tuple[list[str], int]:
        """The URL-encoded local names of the namespace's topic records (managed ledgers and
        partitioned-topic metadata, both domains; a name may repeat), and the newest revision
        among every key under them (cursors included): `none_since` at it holds while no
        topic is written after this read."""
        names: list[str] = []
        newest = 0
        for root in self._roots(tenant, namespace):
            prefix = root + "/"
            for key, held in (await self.store.get_children_values(root)).items():
                name = key.removeprefix(prefix)
                if "/" not in name:
                    names.append(name)
                newest = max(newest, held.revision)
        return names, newest

    def none_since(self, tenant: str, namespace: str, since: int) -> list[Guard]:
        """Hold while no topic of the namespace was written after `since`."""
        return [Guard(root, since, tree=True) for root in self._roots(tenant, namespace)]

    def trees(self, tenant: str, namespace: str) -> list[str]:
        return self._roots(tenant, namespace)


class BundleOwnership:
    """`/namespace/{tenant}/{ns}/{bundleRange}`: which broker owns a bundle (Pulsar's
    `NamespaceEphemeralData`, on the owning broker's session). Keys are what the service's
    watch-fed cache of `/namespace` holds."""

    ROOT = paths.NAMESPACE_OWNERSHIP

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    @staticmethod
    def key(tenant: str, namespace: str, bundle_range: str) -> str:
        return paths.bundle_ownership(tenant, namespace, bundle_range)

    @staticmethod
    def bundle_of(key: str) -> tuple[str, str, str] | None:
        """(tenant, namespace, bundle range) of an ownership key; None for other keys."""
        parts = key.removeprefix(paths.NAMESPACE_OWNERSHIP + "/").split("/")
        if key == paths.NAMESPACE_OWNERSHIP or len(parts) != 3:
            return None
        return parts[0], parts[1], parts[2]

    @staticmethod
    def namespace_root(tenant: str, namespace: str) -> str:
        return paths.namespace_ownership(tenant, namespace)

    async def claim(
        self, key: str, record: bytes, expected_version: int, broker_id: str
    ) -> tuple[bool, Versioned | None]:
        """Write `record` at `key` on the broker's session if `key` is still at
        `expected_version` (0: absent) and the namespace's policies still exist
        (`MetadataStore.put_if_revision`; `NotFound` when the namespace is gone)."""
        found = self.bundle_of(key)
        if found is None:
            raise ValueError(f"{key} is not a bundle ownership key")
        tenant, namespace, _ = found
        lease = await self.store.lease_of(paths.broker(broker_id))
        return await self.store.put_if_revision(
            key, record, expected_version, lease=lease,
            requires=paths.namespace(tenant, namespace),
        )  # fmt: skip

    async def release_namespace(self, tenant: str, namespace: str) -> int:
        """Delete every ownership record of the namespace; the revision after it."""
        return await self.store.delete_children(self.namespace_root(tenant, namespace))


class ForceGc:
    """Ours (BookKeeper's `PUT /api/v1/bookie/gc`, answered for the cluster): the request at
    `/bookie-gc/request` every bookie watches, and each bookie's
    `{"is_in_force_gc": "true"|"false"}` at `/bookie-gc/state/{bookieId}`."""

    REQUEST = paths.BOOKIE_GC_REQUEST

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    async def request(self, value: bytes) -> None:
        await self.store.put_returning_version(self.REQUEST, value)

    async def state(self, bookie_id: str) -> bytes | None:
        found = await self.store.get(paths.bookie_gc_state(bookie_id))
        return None if found is None else found.value

    async def publish_state(self, bookie_id: str, value: bytes) -> None:
        await self.store.put(paths.bookie_gc_state(bookie_id), value)


def ownership_tree(tenant: str, namespace: str) -> str:
    """The namespace's bundle ownership records (`/namespace/{tenant}/{ns}`)."""
    return paths.namespace_ownership(tenant, namespace)


__all__ = [
    "BookieRegistrations",
    "BrokerRegistrations",
    "BundleOwnership",
    "Clusters",
    "FailureDomains",
    "ForceGc",
    "IsolationPolicies",
    "NamespaceIsolation",
    "NamespaceLocalPolicies",
    "NamespacePolicies",
    "NamespaceTopics",
    "RackConfiguration",
    "Tenants",
    "ownership_tree",
]
