"""What the app holds while it runs: the store, the caches and the services built on them.

Every service is built once here, at start, and shared by all requests (they hold no
per-request state)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from api.auth.authorization import Guard
from api.auth.security import build_guard
from api.change_history import HistoryPruner
from api.services.clusters import ClusterService
from api.services.console_ledgers import ConsoleLedgers
from api.services.isolation import IsolationService
from api.services.lint import LintService
from api.services.lookup import LookupService
from api.services.namespace_policies import NamespacePolicyService
from api.services.namespaces import NamespaceService
from api.services.partitioned_topics import PartitionedTopicService
from api.services.placement import PlacementService
from api.services.rack_import import RackImportService
from api.services.racks import RackService
from api.services.storage_audit import StorageAuditService
from api.services.storage_bookies import StorageBookieService, registration_wait
from api.services.tenants import TenantService
from api.services.topics import TopicService
from api.settings import Settings
from metastore import paths
from metastore.cache import WatchedRange
from metastore.store import MetadataStore
from metastore.topology import TopologySnapshot
from metastore.versioned_keys import VersionedKeys
from placement import PlacementConfig, Topology
from storage import LocalBookies, build_ledger_client, build_managed_ledger_factory
from storage.autorecovery import (
    AutoRecovery,
    PlannedMove,
    RepairProgress,
    ReplicationWorker,
    UnderReplication,
    apply_plan,
)
from storage.bookie_client import BookieClient
from storage.ledger import BookiePool, LedgerClient
from storage.managed_ledger import ManagedLedgerFactory


def placement_config(settings: Settings) -> PlacementConfig:
    """PlacementConfig from the broker.conf keys in effect (typed fields and extra keys such
    as `reppRegionsToWrite`); a bad value fails the start."""
    return PlacementConfig.from_broker_conf(settings.runtime_configuration())


def autorecovery(settings: Settings, store: MetadataStore,
                 ledgers: LedgerClient) -> AutoRecovery | None:
    """The auditor candidate and replication worker of this service, when enabled; its id is
    the service's advertised `host:port`."""
    config = settings.autorecovery
    if not config.autoRecoveryDaemonEnabled:
        return None
    return AutoRecovery(VersionedKeys.of(store), ledgers, config, settings.broker_id)


def storage_audit_service(settings: Settings, ledgers: LedgerClient,
                          keys: VersionedKeys) -> StorageAuditService:
    """The background audits, whose repair plans a replication worker of this service applies
    (`storage.autorecovery.plan_repair`)."""
    node = f"{settings.broker_id}/repair"
    worker = ReplicationWorker(ledgers, UnderReplication(keys), settings.autorecovery, node)

    async def repairer(moves: list[PlannedMove], progress: RepairProgress) -> RepairProgress:
        return await apply_plan(worker, keys, moves, progress)

    return StorageAuditService(settings.metadataStoreUrl, settings.runtime_configuration(),
                               Path(settings.dataDir), repairer=repairer)


@dataclass(frozen=True)
class Services:
    """The services routes call, one of each."""

    racks: RackService
    rack_import: RackImportService
    tenants: TenantService
    namespaces: NamespaceService
    namespace_policies: NamespacePolicyService
    clusters: ClusterService
    isolation: IsolationService
    placement: PlacementService
    lint: LintService
    lookup: LookupService
    topics: TopicService
    partitioned_topics: PartitionedTopicService
    storage_bookies: StorageBookieService
    storage_audits: StorageAuditService


@dataclass
class AppState:
    settings: Settings
    store: MetadataStore
    rack_watch: WatchedRange
    bookie_watch: WatchedRange
    broker_watch: WatchedRange
    ownership_watch: WatchedRange
    # namespaces' policies and local policies, read by every produce and lookup
    policies_watch: WatchedRange
    local_policies_watch: WatchedRange
    placement_config: PlacementConfig
    topology: TopologySnapshot
    services: Services
    ledgers: LedgerClient
    managed_ledgers: ManagedLedgerFactory
    versioned_keys: VersionedKeys  # ledger metadata and other records with Pulsar's versions
    guard: Guard  # who may do what (api.auth.authorization)
    history_pruner: HistoryPruner  # the change history's retention (api.change_history)
    console_ledgers: ConsoleLedgers  # the placement console's ledgers and verdicts
    autorecovery: AutoRecovery | None = None  # with autoRecoveryDaemonEnabled

    @classmethod
    def build(
        cls, settings: Settings, store: MetadataStore, local_bookies: LocalBookies | None = None
    ) -> AppState:
        config = placement_config(settings)
        topology = TopologySnapshot.watching(store, config)
        broker_watch = WatchedRange(store, paths.BROKERS, prefix=True)
        ownership_watch = WatchedRange(store, paths.NAMESPACE_OWNERSHIP, prefix=True)
        policies_watch = WatchedRange(store, paths.TENANTS, prefix=True)
        local_policies_watch = WatchedRange(store, paths.LOCAL_POLICIES, prefix=True)
        clusters = ClusterService(store)

        async def current_topology() -> Topology:
            return (await topology.current()).topology

        frame_limit = settings.bookie_frame_limit

        async def connect(bookie_id: str) -> BookieClient:
            return await BookieClient.connect(bookie_id, max_frame=frame_limit)

        ledgers = build_ledger_client(store, BookiePool(connect, frame_limit),
                                      current_topology, config)
        managed_ledgers = build_managed_ledger_factory(store, ledgers, namespace_guard=True)
        namespaces = NamespaceService(store, settings, managed_ledgers.delete)
        versioned_keys = VersionedKeys.of(store)
        racks = RackService(store, settings, topology.racks)
        topics = TopicService(store, settings, config, managed_ledgers)
        services = Services(
            racks=racks,
            rack_import=RackImportService(store, settings),
            tenants=TenantService(store, settings, namespaces),
            namespaces=namespaces,
            namespace_policies=NamespacePolicyService(store, settings),
            clusters=clusters,
            isolation=IsolationService(store, clusters),
            placement=PlacementService(store, namespaces, topology),
            lint=LintService(store, topology),
            lookup=LookupService(store, settings, broker_watch, ownership_watch),
            topics=topics,
            partitioned_topics=PartitionedTopicService(store, settings, managed_ledgers, topics),
            storage_bookies=StorageBookieService(
                store, versioned_keys, config, local_bookies, client=ledgers, racks=racks,
                recovery=settings.autorecovery,
                node_id=settings.broker_id,
                wait_seconds=registration_wait(settings.metadataStoreOperationTimeoutSeconds)),
            storage_audits=storage_audit_service(settings, ledgers, versioned_keys),
        )
        return cls(
            settings=settings,
            store=store,
            rack_watch=topology.racks,
            bookie_watch=topology.bookies,
            broker_watch=broker_watch,
            ownership_watch=ownership_watch,
            policies_watch=policies_watch,
            local_policies_watch=local_policies_watch,
            placement_config=config,
            topology=topology,
            services=services,
            ledgers=ledgers,
            managed_ledgers=managed_ledgers,
            versioned_keys=versioned_keys,
            guard=build_guard(settings, store),
            history_pruner=HistoryPruner(store, settings),
            autorecovery=autorecovery(settings, store, ledgers),
            console_ledgers=ConsoleLedgers(store, versioned_keys),
        )

    def watches(self) -> tuple[WatchedRange, ...]:
        return (self.rack_watch, self.bookie_watch, self.broker_watch, self.ownership_watch,
                self.policies_watch, self.local_policies_watch)

    async def start(self) -> None:
        for watch in self.watches():
            await watch.start()
        self.history_pruner.start()
        self.console_ledgers.start()
        if self.autorecovery is not None:
            self.autorecovery.start()
        await self.services.storage_bookies.resume_decommissions()

    async def stop(self) -> None:
        await self.services.storage_audits.stop()
        await self.history_pruner.stop()
        await self.services.storage_bookies.close()
        if self.autorecovery is not None:
            await self.autorecovery.stop()
            await self.autorecovery.keys.close()
        await self.console_ledgers.stop()
        await self.managed_ledgers.close()
        await self.ledgers.close()
        for watch in self.watches():
            await watch.stop()
        await self.versioned_keys.close()
        await self.store.close()
