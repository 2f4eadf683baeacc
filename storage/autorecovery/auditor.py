"""The auditor: one per cluster, elected through etcd, marking ledgers that need repair.

Election (Pulsar's `PulsarLedgerAuditorManager` / `LeaderElectionImpl`): the candidate that
creates `/ledgers/underreplication/leader` on its lease leads; the value is its id as a JSON
string (`"host:port"`). The others look again every tick; when the leader's lease expires
(process gone) or it steps down, the key vanishes and one of them wins the next create.
Leadership ends as soon as the lease cannot be refreshed, and an auditor acts (marks a
ledger) only while its last successful refresh is less than a lease TTL old (refreshes every
TTL/3, also between ledgers of a long scan), so two auditors never act at once: a successor
can only be elected after the lease expired (the store's create-if-absent and the lease are
the only arbiters).

While leading (`Auditor.java` and its tasks):
- lost bookies: a bookie whose registration disappeared since the last look is lost. With
  `lostBookieRecoveryDelay` 0 the audit runs now; otherwise it is scheduled after the delay and
  cancelled if the bookie comes back; more than one lost at once audits now. The delay lives
  at `/ledgers/underreplication/lostBookieRecoveryDelay` (set from the configuration the first
  time); a rewrite of that key (`trigger_audit`) audits now.
- the bookie audit (also every `auditorPeriodicBookieCheckInterval` s, 0 = only on events,
  and once on becoming leader): scan every ledger's metadata, mark each ledger with a segment
  on an unregistered bookie, recording the missing bookies (merged into an existing mark);
- the placement check (every `auditorPeriodicPlacementPolicyCheckInterval` s, 0 = off): judge
  every segment of every ledger, OPEN ones too (upstream skips them, apache/bookkeeper#3971),
  with `placement.violations.check_fragment` under the ledger's recorded groups; violations
  other than "not registered"/"read-only" (the bookie audit's business) count as not
  adhering, and with `repairedPlacementPolicyNotAdheringBookieEnable` the ledger is marked
  with an empty replica list (as upstream) for the workers' `replace_to_adhere` repair.

- the all-ledgers check (`auditorPeriodicCheckInterval`) and the replicas check
  (`auditorReplicasCheckInterval`): `storage.autorecovery.checker`, a task of their own while
  leading (so a long check never delays the lost-bookie audit), given the bookie pool.

The registration list and the delay key are read every `tick` seconds rather than watched.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from metastore.errors import AlreadyExists
from metastore.ledgers import LedgerMetadataStore
from metastore.repositories.underreplication import AUDITOR_LEADER, UnderReplication
from metastore.versioned_keys import VersionedKeys
from placement import Adherence, PlacementConfig, Topology
from placement.violations import Violation, check_fragment
from storage.autorecovery.checker import PeriodicChecks
from storage.autorecovery.config import AutoRecoveryConfig
from storage.autorecovery.registry import registered_bookies
from storage.ledger.bookies import BookiePool
from storage.ledger.client import TopologySource
from storage.ledger.ensemble import recorded_affinity
from storage.ledger.metadata import LedgerMetadata

log = logging.getLogger(__name__)

# what the bookie audit handles; the placement check judges the rest
LIVENESS = Violation.NOT_REGISTERED | Violation.READ_ONLY


def segment_adheres(md: LedgerMetadata, ensemble: Sequence[str], topology: Topology,
                    config: PlacementConfig) -> bool:
    """The isolation-aware adherence check on one segment under the ledger's recorded
    groups, liveness set aside."""
    verdict = check_fragment(topology, ensemble, md.write_quorum_size, md.ack_quorum_size,
                             config, affinity=recorded_affinity(md))
    return not (verdict.adherence is Adherence.FAIL and verdict.violations & ~LIVENESS)


def ledger_adheres(md: LedgerMetadata, topology: Topology, config: PlacementConfig) -> bool:
    return all(segment_adheres(md, e, topology, config) for e in md.ensembles.values())


class LostLeadership(Exception):
    """The auditor's lease may have expired: it must stop acting."""


@dataclass
class AuditorStats:
    bookie_audits: int = 0
    placement_checks: int = 0
    ledgers_marked: int = 0
    not_adhering: set[int] = field(default_factory=set)


class Auditor:
    def __init__(
        self,
        keys: VersionedKeys,
        marks: UnderReplication,
        topology: TopologySource,
        placement_config: PlacementConfig,
        config: AutoRecoveryConfig,
        auditor_id: str,
        *,
        tick: float = 1.0,
        bookies: BookiePool | None = None,
    ) -> None:
        self.keys = keys
        self.marks = marks
        self.ledgers = LedgerMetadataStore(keys)
        self.topology = topology
        self.placement_config = placement_config
        self.config = config
        self.auditor_id = auditor_id
        self.tick = tick
        self.is_leader = False
        self.stats = AuditorStats()
        self._lease: int | None = None
        self._refreshed = 0.0  # monotonic start of the last successful refresh
        # the data checks need bookie connections; without them they do not run
        self.periodic = None if bookies is None else PeriodicChecks(
            keys, marks, bookies, config, self._mark, tick=tick)

    # -- election -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Stand for election until cancelled; lead while elected."""
        while True:
            try:
                lease = await self.keys.grant_lease(self.config.session_ttl)
                try:
                    await self.keys.create(AUDITOR_LEADER,
                                           json.dumps(self.auditor_id).encode(), lease)
                except AlreadyExists:
                    await self.keys.revoke_lease(lease)
                    await asyncio.sleep(self.tick)
                    continue
                log.info("auditor elected: %s", self.auditor_id)
                self.is_leader = True
                self._lease, self._refreshed = lease, time.monotonic()
                checks = self._start_periodic_checks()
                try:
                    await self._lead(lease)
                except LostLeadership:
                    log.warning("auditor %s lost its lease", self.auditor_id)
                finally:
                    await self._stop_periodic_checks(checks)
                    self._lease = None
                    self.is_leader = False
                    with contextlib.suppress(Exception):
                        await asyncio.shield(self.keys.revoke_lease(lease))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("auditor %s: election or audit failed", self.auditor_id)
                await asyncio.sleep(self.tick)

    async def _lead(self, lease: int) -> None:
        cfg = self.config
        await self.marks.init_lost_bookie_recovery_delay(cfg.lostBookieRecoveryDelay)
        delay, delay_version = await self._delay()
        known = await registered_bookies(self.keys)
        await self.audit_bookies()
        now = time.monotonic()
        next_bookie_check = now + cfg.auditorPeriodicBookieCheckInterval
        next_placement = now if cfg.auditorPeriodicPlacementPolicyCheckInterval > 0 else None
        pending_audit_at: float | None = None
        while True:
            now = time.monotonic()
            await self._keep_leading()
            available = await registered_bookies(self.keys)
            lost = known - available
            known = available
            stored_delay, stored_version = await self._delay()
            triggered = stored_version != delay_version
            delay, delay_version = stored_delay, stored_version
            if triggered:
                pending_audit_at = now  # trigger_audit / delay changed: audit now
            if lost:
                if delay == 0 or len(lost) > 1:
                    pending_audit_at = now
                elif pending_audit_at is None:
                    pending_audit_at = now + delay
            if pending_audit_at is not None and now >= pending_audit_at:
                pending_audit_at = None
                await self.audit_bookies()
                next_bookie_check = now + cfg.auditorPeriodicBookieCheckInterval
                if next_placement is not None or triggered:
                    await self.check_placement()
            elif (pending_audit_at is None and cfg.auditorPeriodicBookieCheckInterval > 0
                    and now >= next_bookie_check):
                await self.audit_bookies()
                next_bookie_check = now + cfg.auditorPeriodicBookieCheckInterval
            if next_placement is not None and now >= next_placement:
                await self.check_placement()
                next_placement = now + cfg.auditorPeriodicPlacementPolicyCheckInterval
            await asyncio.sleep(self.tick)

    def _start_periodic_checks(self) -> asyncio.Task[None] | None:
        if self.periodic is None:
            return None
        return asyncio.create_task(self._periodic_checks(self.periodic), name="auditor checks")

    @staticmethod
    async def _periodic_checks(periodic: PeriodicChecks) -> None:
        periodic.new_term()
        while True:
            try:
                await periodic.run()
            except LostLeadership:
                return  # the main loop sees it too and steps down
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("auditor periodic check failed")
                await asyncio.sleep(periodic.tick)

    @staticmethod
    async def _stop_periodic_checks(task: asyncio.Task[None] | None) -> None:
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(BaseException):
            await task

    async def _keep_leading(self) -> None:
        """Refresh the lease when a third of its TTL passed; LostLeadership when it cannot be
        refreshed or the last refresh is a TTL old."""
        ttl = self.config.session_ttl
        started = time.monotonic()
        if self._lease is None or started - self._refreshed >= ttl:
            raise LostLeadership()
        if started - self._refreshed >= ttl / 3:
            try:
                alive = await self.keys.refresh_lease(self._lease)
            except Exception as exc:
                log.warning("auditor lease refresh failed: %s", exc)
                alive = True
            else:
                if alive:
                    self._refreshed = started
            if not alive or time.monotonic() - self._refreshed >= ttl:
                raise LostLeadership()

    async def _mark(self, ledger_id: int, missing: Iterable[str]) -> None:
        await self._keep_leading()
        await self.marks.mark(ledger_id, missing)

    async def _delay(self) -> tuple[int, int]:
        found = await self.marks.lost_bookie_recovery_delay()
        return (self.config.lostBookieRecoveryDelay, -1) if found is None else found

    # -- checks -------------------------------------------------------------------------------

    async def audit_bookies(self) -> set[int]:
        """Mark every ledger with a segment on an unregistered bookie; the ids marked."""
        available = await registered_bookies(self.keys)
        marked: set[int] = set()
        async for stored in self.ledgers.ledgers():
            md = stored.metadata
            missing = {b for ensemble in md.ensembles.values() for b in ensemble
                       if b not in available}
            if missing:
                await self._mark(md.ledger_id, missing)
                marked.add(md.ledger_id)
        self.stats.bookie_audits += 1
        self.stats.ledgers_marked += len(marked)
        return marked

    async def check_placement(self) -> set[int]:
        """Judge every ledger's segments; mark the failing ones when repair is enabled."""
        topology = await self.topology()
        bad: set[int] = set()
        async for stored in self.ledgers.ledgers():
            if not ledger_adheres(stored.metadata, topology, self.placement_config):
                bad.add(stored.metadata.ledger_id)
        if self.config.repairedPlacementPolicyNotAdheringBookieEnable:
            for ledger_id in sorted(bad):
                await self._mark(ledger_id, ())
        self.stats.placement_checks += 1
        self.stats.not_adhering = bad
        return bad
