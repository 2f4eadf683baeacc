"""The replication worker: takes under-replicated ledgers one at a time and restores them
on bookies the ledger's recorded policy accepts (BookKeeper's `ReplicationWorker` +
`LedgerFragmentReplicator`).

For each marked ledger it can lock (ephemeral `urL<id>` lock on its lease):
1. gone ledger: the mark is removed (upstream: "mark replicated");
2. an OPEN ledger whose last segment lists an unregistered bookie (or breaks placement) is
   left alone for `openLedgerRereplicationGracePeriod` ms after the mark, so a live writer
   can do its own ensemble change; after that it is recovered (fenced, tail re-written,
   closed: `storage.ledger.recovery`). Earlier segments of an OPEN ledger are closed
   fragments and are repaired at once;
3. per segment: each member that is not registered, or that the mark names and that cannot
   serve its part of the segment (read as the all-ledgers check reads: a bookie that came
   back without its data is registered but has lost it; upstream's worker re-checks the
   ledger's fragments the same way before repairing), is replaced through `replace_bookie`
   under the ledger's recorded groups (strict groups never leave them); with
   `repairedPlacementPolicyNotAdheringBookieEnable` a segment failing the isolation-aware
   check gets `replace_to_adhere`'s ensemble instead;
4. the entries the replaced index stores (its stripe of the segment) are read from surviving
   replicas (spread over them; known-lost bookies last) and written to the new bookie with
   RECOVERY_ADD, a window of `rereplicationEntryBatchSize` entries in flight, at most
   `replicationRateByBytes` bytes/s (-1: no limit); an entry counts as copied once the new
   bookie acknowledged it (after its journal's fdatasync); the first and last entry copied
   are read back from the new bookie and compared byte for byte;
5. the segment's metadata is updated by CAS (only if the old bookie is still at that index);
6. nothing left to repair: the mark is removed, at the version read when the lock was taken
   (a mark merged or made again meanwhile stays for the next round). Otherwise the ledger is
   retried after `lockReleaseOfFailedLedgerGracePeriod` ms, or `rwRereplicateBackoffMs` when
   no bookie was eligible; `stuck` keeps the reason for each such ledger (e.g. the strict
   group's shortage).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from metastore.repositories.underreplication import Mark, UnderReplication
from placement import NotEnoughBookies, PlacementConfig, Topology, write_set
from placement.violations import check_fragment, kind_names, member_violations
from storage.autorecovery.auditor import segment_adheres
from storage.autorecovery.checker import FragmentChecker, ReadPacer
from storage.autorecovery.config import AutoRecoveryConfig
from storage.autorecovery.registry import registered_bookies
from storage.bookie.errors import BookieError
from storage.ledger.client import LedgerClient
from storage.ledger.ensemble import adhering_ensemble, recorded_affinity, replacements
from storage.ledger.errors import LedgerError, NoSuchLedger
from storage.ledger.handle import ReadableLedger, master_key
from storage.ledger.metadata import LedgerMetadata, LedgerState
from storage.ledger.recovery import recover

log = logging.getLogger(__name__)


class Deferred(Exception):
    """Not now: retry the ledger after `seconds`."""

    def __init__(self, seconds: float, why: str) -> None:
        super().__init__(why)
        self.seconds = seconds
        self.why = why


class Waiting(Deferred):
    """Not now, for a reason that passes by itself (a writer's grace period, a lock)."""


class ReplicationWorker:
    def __init__(
        self,
        client: LedgerClient,
        marks: UnderReplication,
        config: AutoRecoveryConfig,
        worker_id: str,
        *,
        tick: float = 1.0,
    ) -> None:
        self.client = client
        self.marks = marks
        self.keys = marks.keys
        self.config = config
        self.worker_id = worker_id
        self.tick = tick
        self.stuck: dict[int, str] = {}
        self.replicated_ledgers = 0
        self.copied_entries = 0
        self.copied_bytes = 0
        self._retry_at: dict[int, float] = {}
        self._next_free = 0.0  # the byte-rate throttle's clock
        self._lease: int | None = None

    # -- loop ---------------------------------------------------------------------------------

    async def run(self) -> None:
        self._lease = await self.keys.grant_lease(self.config.session_ttl)
        keeper = asyncio.create_task(self._keep_alive(), name="worker lease")
        try:
            while True:
                try:
                    if self._lease is None:  # expired: the locks it held are gone too
                        self._lease = await self.keys.grant_lease(self.config.session_ttl)
                    worked = await self.run_once(self._lease)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("replication worker %s failed a round", self.worker_id)
                    worked = False
                if not worked:
                    await asyncio.sleep(self.tick)
        finally:
            keeper.cancel()
            with contextlib.suppress(BaseException):
                await keeper
            if self._lease is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.keys.revoke_lease(self._lease))

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(self.config.session_ttl / 3)
            lease = self._lease
            if lease is None:
                continue
            try:
                alive = await self.keys.refresh_lease(lease)
            except Exception as exc:
                log.warning("worker lease refresh failed: %s", exc)
                alive = False
            if not alive and self._lease == lease:
                self._lease = None

    async def run_once(self, lease: int) -> bool:
        """Repair one marked ledger this worker can lock; False when there was none."""
        now = time.monotonic()
        for mark in await self.marks.marks():
            if self._retry_at.get(mark.ledger_id, 0.0) > now:
                continue
            if not await self.marks.lock(mark.ledger_id, lease, self.worker_id):
                continue
            try:
                # the mark as it is now that we hold the lock: only a lock holder removes a
                # mark, so its version is the one to remove at (upstream reads it the same way)
                locked = await self.marks.get(mark.ledger_id)
                if locked is not None:
                    await self.rereplicate(locked)
            except Deferred as exc:
                self._retry_at[mark.ledger_id] = time.monotonic() + exc.seconds
                self.stuck[mark.ledger_id] = exc.why
            else:
                self._retry_at.pop(mark.ledger_id, None)
                self.stuck.pop(mark.ledger_id, None)
            finally:
                await self.marks.unlock(mark.ledger_id)
            return True
        return False

    # -- one ledger ---------------------------------------------------------------------------

    async def rereplicate(self, mark: Mark) -> None:
        """Repair the ledger and remove its mark, or raise Deferred."""
        ledger_id = mark.ledger_id
        try:
            md = await self.client.read_metadata(ledger_id)
        except NoSuchLedger:
            await self.marks.unmark(ledger_id)
            return
        cfg = self.config
        available = await registered_bookies(self.keys)
        topology = await self.client.topology()
        lost_data = await self._lost_data(md, mark, available)
        last_start = max(md.ensembles)
        if not md.is_closed and self._needs_repair(
                md, md.current_ensemble, available - lost_data.get(last_start, set()),
                topology):
            age_ms = int(time.time() * 1000) - (mark.ctime or 0)
            grace = cfg.openLedgerRereplicationGracePeriod
            if md.state is LedgerState.OPEN and age_ms < grace:
                raise Deferred((grace - age_ms) / 1000,
                               f"open ledger: waiting {grace} ms for its writer")
            try:
                md = await recover(self.client, ledger_id)
            except LedgerError as exc:
                raise Deferred(cfg.rwRereplicateBackoffMs / 1000,
                               f"recovery failed: {exc}") from exc
            lost_data = await self._lost_data(md, mark, available)  # now a closed fragment
        starts = sorted(md.ensembles)
        for k, start in enumerate(starts):
            if not md.is_closed and k == len(starts) - 1:
                continue  # the open fragment: its writer owns it
            end = starts[k + 1] - 1 if k + 1 < len(starts) else md.last_entry_id
            md = await self._repair_segment(md, start, end,
                                            available - lost_data.get(start, set()), topology)
        md = await self.client.read_metadata(ledger_id)
        left = [s for s, e in sorted(md.ensembles.items())
                if (md.is_closed or s != max(md.ensembles))
                and self._needs_repair(md, e, available - lost_data.get(s, set()), topology)]
        if left:
            raise Deferred(cfg.lockReleaseOfFailedLedgerGracePeriod / 1000,
                           f"segments {left} still need repair")
        if await self.marks.unmark(ledger_id, mark.version):
            self.replicated_ledgers += 1
        # else: marked again while we worked (new replicas, the auditor or a check): the
        # mark stays and the next round looks at the ledger again

    async def _lost_data(self, md: LedgerMetadata, mark: Mark,
                         available: frozenset[str]) -> dict[int, set[str]]:
        """{segment start: registered bookies named by the mark that lost their part of it}.
        A registered bookie is only suspect when the mark names it (the all-ledgers check
        marks such bookies); its fragments are read as that check reads them."""
        suspects = set(mark.replicas) & available
        if not suspects:
            return {}
        checker = FragmentChecker(self.client.bookies)
        return await checker.lost_bookies(md, available, ReadPacer(0), only=suspects)

    def _needs_repair(self, md: LedgerMetadata, ensemble: tuple[str, ...],
                      available: frozenset[str], topology: Topology) -> bool:
        if any(b not in available for b in ensemble):
            return True
        return (self.config.repairedPlacementPolicyNotAdheringBookieEnable
                and not segment_adheres(md, ensemble, topology, self.client.config))

    def _targets(self, md: LedgerMetadata, ensemble: tuple[str, ...],
                 available: frozenset[str], topology: Topology) -> dict[int, str]:
        lost = [b for b in ensemble if b not in available]
        client = self.client
        try:
            if lost:
                return replacements(topology, md, client.config, client.rng, ensemble, lost,
                                    exclude=set(ensemble) - available)
            if self._needs_repair(md, ensemble, available, topology):
                new = adhering_ensemble(topology, md, client.config, client.rng, ensemble)
                if not new:
                    raise Deferred(self.config.rwRereplicateBackoffMs / 1000,
                                   "no ensemble adhering to the recorded policy")
                return {i: b for i, b in enumerate(new) if b != ensemble[i]}
        except NotEnoughBookies as exc:
            raise Deferred(self.config.rwRereplicateBackoffMs / 1000, str(exc)) from exc
        return {}

    async def _repair_segment(self, md: LedgerMetadata, start: int, end: int,
                              available: frozenset[str], topology: Topology) -> LedgerMetadata:
        ensemble = md.ensembles[start]
        targets = self._targets(md, ensemble, available, topology)
        if not targets:
            return md
        lost = frozenset(b for b in ensemble if b not in available)
        for index, new in targets.items():
            await self._copy(md, start, end, index, new, avoid=lost)
        return await self._swap(md.ledger_id, start,
                                {i: (ensemble[i], new) for i, new in targets.items()})

    async def _copy(self, md: LedgerMetadata, start: int, end: int, index: int,
                    new: str, avoid: frozenset[str] = frozenset()) -> None:
        """The entries of [start, end] striped to `index`, copied to `new` and verified.

        A window of `rereplicationEntryBatchSize` entries is in flight: each entry is read
        from a surviving replica (the bookie being replaced and `avoid`, the ones known lost,
        only as a last resort; the stripe's reads spread over the survivors), then written to
        `new` with RECOVERY_ADD, and the next entry starts as soon as one is acknowledged
        (after the target's fdatasync) rather than when the whole batch is. Upstream copies
        sub-fragments of that many entries one after the other; the bound on entries in
        flight is the same, the idle time at each batch's end is gone."""
        reader = ReadableLedger(md, self.client.bookies)
        key = master_key(md.password or b"")
        stripe = [e for e in range(start, end + 1)
                  if index in write_set(e, md.ensemble_size, md.write_quorum_size)]
        last_resort = avoid | {md.ensembles[start][index]}
        ends = {stripe[0], stripe[-1]} if stripe else set()
        copied: dict[int, bytes] = {}  # the first and last entry, for the read-back check

        async def one(entry_id: int) -> None:
            packaged, _ = await reader.read_packaged(entry_id, avoid=last_resort, spread=True)
            await self._throttle(len(packaged))
            connection = await self.client.bookies.get(new)
            await connection.add(md.ledger_id, entry_id, key, packaged, recovery=True)
            if entry_id in ends:
                copied[entry_id] = packaged
            self.copied_entries += 1
            self.copied_bytes += len(packaged)

        try:
            await in_window(one, stripe, self.config.rereplicationEntryBatchSize)
            connection = await self.client.bookies.get(new)
            for entry_id in ends:
                if await connection.read(md.ledger_id, entry_id) != copied[entry_id]:
                    raise Deferred(self.config.rwRereplicateBackoffMs / 1000,
                                   f"entry {entry_id} read back from {new} differs")
        except (LedgerError, BookieError, OSError, TimeoutError) as exc:
            raise Deferred(self.config.rwRereplicateBackoffMs / 1000,
                           f"copy to {new} failed: {type(exc).__name__}: {exc}") from exc

    async def _throttle(self, size: int) -> None:
        rate = self.config.replicationRateByBytes
        if rate <= 0:
            return
        now = time.monotonic()
        start = max(self._next_free, now)  # this copy's turn under the byte rate
        self._next_free = start + size / rate
        if start > now:
            await asyncio.sleep(start - now)

    async def _swap(self, ledger_id: int, start: int,
                    changes: dict[int, tuple[str, str]]) -> LedgerMetadata:
        """CAS: in segment `start`, each index's old bookie becomes the new one."""

        async def change(current: LedgerMetadata) -> LedgerMetadata | None:
            ensemble = list(current.ensembles.get(start, ()))
            if not ensemble or any(ensemble[i] != old for i, (old, _) in changes.items()):
                raise Deferred(self.config.rwRereplicateBackoffMs / 1000,
                               f"segment {start} changed during the copy")
            for i, (_, new) in changes.items():
                ensemble[i] = new
            return replace(current, ensembles={**current.ensembles, start: tuple(ensemble)})

        return await self.client.update_metadata(ledger_id, change)

    # -- entry points for decommission and audit plans (outside the marks loop) ---------------

    async def move_off(self, ledger_id: int, bookie: str, lease: int, *,
                       since_ms: int) -> int:
        """Copy every segment of the ledger that lists `bookie` to a bookie the ledger's
        recorded policy accepts (`replace_bookie`, never outside strict groups), then swap
        it in by CAS: the segments moved. An OPEN ledger whose last segment lists the bookie
        is left to its writer for `openLedgerRereplicationGracePeriod` ms after `since_ms`
        (epoch ms), then recovered and closed. Raises `Deferred` with the reason."""
        if not await self.marks.lock(ledger_id, lease, self.worker_id):
            raise Waiting(self.tick, "locked by a replication worker")
        try:
            return await self._move_off(ledger_id, bookie, since_ms)
        finally:
            await self.marks.unlock(ledger_id)

    async def _move_off(self, ledger_id: int, bookie: str, since_ms: int) -> int:
        cfg = self.config
        try:
            md = await self.client.read_metadata(ledger_id)
        except NoSuchLedger:
            return 0
        if not md.is_closed and bookie in md.current_ensemble:
            waited = int(time.time() * 1000) - since_ms
            grace = cfg.openLedgerRereplicationGracePeriod
            if md.state is LedgerState.OPEN and waited < grace:
                raise Waiting((grace - waited) / 1000,
                              f"open ledger: waiting {grace} ms for its writer to change "
                              "ensemble")
            try:
                md = await recover(self.client, ledger_id)
            except LedgerError as exc:
                raise Deferred(cfg.rwRereplicateBackoffMs / 1000,
                               f"recovery failed: {exc}") from exc
        available = await registered_bookies(self.keys)
        topology = await self.client.topology()
        moved = 0
        starts = sorted(md.ensembles)
        for k, start in enumerate(starts):
            ensemble = md.ensembles[start]
            if bookie not in ensemble or (not md.is_closed and k == len(starts) - 1):
                continue
            end = starts[k + 1] - 1 if k + 1 < len(starts) else md.last_entry_id
            index = ensemble.index(bookie)
            try:
                chosen = replacements(topology, md, self.client.config, self.client.rng,
                                      ensemble, [bookie],
                                      exclude=(set(ensemble) - available) | {bookie})
            except NotEnoughBookies as exc:
                raise Deferred(cfg.rwRereplicateBackoffMs / 1000,
                               no_target_reason(md, topology, exc)) from exc
            new = chosen[index]
            await self._copy(md, start, end, index, new)
            md = await self._swap(ledger_id, start, {index: (bookie, new)})
            moved += 1
        return moved

    async def apply_move(self, ledger_id: int, segment: int, position: int, bookie_out: str,
                         bookie_in: str, lease: int) -> None:
        """One move of an audit's repair plan: copy segment number `segment` (0-based, in
        entry order) at `position` from `bookie_out` to `bookie_in` and swap it in. Checked
        first against the live metadata, topology and the ledger's recorded policy; a move
        that no longer applies raises `Stale` (skipped, with the reason), one that cannot
        run now `Deferred`."""
        if not await self.marks.lock(ledger_id, lease, self.worker_id):
            raise Waiting(self.tick, "locked by a replication worker")
        try:
            try:
                md = await self.client.read_metadata(ledger_id)
            except NoSuchLedger:
                raise Stale("the ledger was deleted") from None
            topology = await self.client.topology()
            start, end = check_move(md, topology, self.client.config, segment, position,
                                    bookie_out, bookie_in)
            await self._copy(md, start, end, position, bookie_in)
            await self._swap(ledger_id, start, {position: (bookie_out, bookie_in)})
        finally:
            await self.marks.unlock(ledger_id)


async def in_window(work: Callable[[int], Awaitable[None]], items: list[int],
                    window: int) -> None:
    """`work(item)` for every item, at most `window` at a time, each next one started as
    soon as one finishes; the first failure cancels the rest and is raised."""
    pending = iter(items)

    async def lane() -> None:
        for item in pending:
            await work(item)

    lanes = [asyncio.ensure_future(lane()) for _ in range(min(window, len(items)))]
    if not lanes:
        return
    try:
        done, _ = await asyncio.wait(lanes, return_when=asyncio.FIRST_EXCEPTION)
        for lane_done in done:
            error = lane_done.exception()
            if error is not None:
                raise error
    finally:
        for lane_task in lanes:
            lane_task.cancel()
        await asyncio.gather(*lanes, return_exceptions=True)


class Stale(Exception):
    """A planned move that no longer applies: skipped, `str()` says why."""


def check_move(md: LedgerMetadata, topology: Topology, config: PlacementConfig, segment: int,
               position: int, bookie_out: str, bookie_in: str) -> tuple[int, int]:
    """The segment's first and last entry when the move still applies, else `Stale`."""
    starts = sorted(md.ensembles)
    if not 0 <= segment < len(starts):
        raise Stale(f"the ledger has no segment {segment} any more")
    if not md.is_closed and segment == len(starts) - 1:
        raise Stale("the segment is the open ledger's last one: its writer owns it")
    start = starts[segment]
    ensemble = md.ensembles[start]
    if not 0 <= position < len(ensemble) or ensemble[position] != bookie_out:
        found = ensemble[position] if 0 <= position < len(ensemble) else None
        raise Stale(f"position {position} holds {found}, not {bookie_out}")
    if bookie_in in ensemble:
        raise Stale(f"{bookie_in} is already in the segment")
    affinity = recorded_affinity(md)
    refused = member_violations(topology, bookie_in, config, affinity=affinity)
    if not topology.is_known(bookie_in) or refused:
        why = "; ".join(kind_names(int(refused))) if refused else "not writable"
        raise Stale(f"{bookie_in} is not accepted by the ledger's recorded policy now: {why}")
    after = tuple(bookie_in if i == position else b for i, b in enumerate(ensemble))
    w, a = md.write_quorum_size, md.ack_quorum_size
    before_v = check_fragment(topology, ensemble, w, a, config, affinity=affinity).violations
    after_v = check_fragment(topology, after, w, a, config, affinity=affinity).violations
    if after_v & ~before_v:
        raise Stale("the move would add violations: "
                    + ", ".join(kind_names(int(after_v & ~before_v))))
    end = starts[segment + 1] - 1 if segment + 1 < len(starts) else md.last_entry_id
    return start, end


def no_target_reason(md: LedgerMetadata, topology: Topology, exc: NotEnoughBookies) -> str:
    """Why no bookie can take the copy, led by the recorded groups (e.g. "strict group
    'share' has no other writable bookie")."""
    groups = recorded_affinity(md)
    if groups is None or groups.disables_isolation:
        return f"the cluster has no other writable bookie the placement policy accepts: {exc}"
    names = ", ".join(f"'{g}'" for g in (*groups.primary, *groups.secondary))
    plural = "s" if len(groups.primary) + len(groups.secondary) > 1 else ""
    kind = "strict group" if groups.strict else "group"
    verb = "have" if plural else "has"
    return f"{kind}{plural} {names} {verb} no other writable bookie: {exc}"
