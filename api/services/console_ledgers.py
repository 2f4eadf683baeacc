"""What the placement console keeps between requests: every ledger's metadata, each ledger's
verdict under its namespace's current policy, and each namespace's usable bookies, kept up to
date at the cost of what changed.

The ledgers are read once (from the service's start, in the background), then followed by an
etcd watch of the ledger metadata keys (from the revision before that read, so nothing is
missed): a created or changed ledger is decoded again, a deleted one dropped. When the watch
breaks, everything is read again. Until a read is done, `progress` tells how far it is (n of N
ledgers), so the console shows what needs no ledgers at once and the rest when it is there.

A fragment's verdict (`placement.check_fragment`) depends only on its members' places in the
topology (location, group, registration, read-only, unplaceable) and on its namespace's
policy. So each judgement remembers every member's place and every namespace's policy it was
made under; the next one judges again only the ledgers that changed, those with a member whose
place changed and those of a namespace whose policy changed. A preview (`what_if`) judges the
same subset under the proposed topology or policy, without keeping the result.

Many ledgers at once (the first judgement of every ledger) are judged by the batch check of
`placement.batch` (numpy, the Spark audit's), which the property tests hold to
`check_fragment`'s answer; only the ledgers it finds breaking their policy are judged again one
by one, for the engine's reasons.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from metastore import paths
from metastore.errors import MetastoreError
from metastore.ledger_metadata import LedgerMetadata, decode_ledger_metadata
from metastore.ledgers import LedgerMetadataStore
from metastore.store import MetadataStore
from metastore.versioned_keys import VersionedKeys
from placement import (
    AffinityGroups,
    EnsembleRequest,
    PlacementConfig,
    Topology,
    check_fragment,
    effective_groups,
)
from placement.batch import BatchTopology, PolicyTable, check_batch
from placement.config import PlacementMode
from placement.isolation import allowed_view
from placement.topology import MemoKey
from placement.violations import kind_names
from storage.ledger import MANAGED_LEDGER_NAME

log = logging.getLogger(__name__)

NO_NAMESPACE = ""
Verdict = dict[str, Any]
# above this many ledgers to judge, judging runs in a worker thread (the event loop stays free)
# as a task of its own that a request's deadline does not cancel: the next request finds it done
INLINE_JUDGEMENTS = 2000
# from this many ledgers, the batch check finds the violating ones first
BATCH_JUDGEMENTS = 200
READ_PAGE = 250  # ledgers decoded between two turns of the event loop


@dataclass(frozen=True)
class LedgerRecord:
    """One ledger as the console shows it: its managed ledger (topic) and namespace, if any."""

    metadata: LedgerMetadata
    topic: str
    namespace: str

    @classmethod
    def of(cls, metadata: LedgerMetadata) -> LedgerRecord:
        topic = metadata.custom_metadata.get(MANAGED_LEDGER_NAME, b"").decode("utf-8", "replace")
        return cls(metadata, topic, namespace_of_topic(topic))

    @property
    def members(self) -> frozenset[str]:
        return frozenset(b for ensemble in self.metadata.ensembles.values() for b in ensemble)


@dataclass(frozen=True)
class NamespacePolicy:
    name: str
    request: EnsembleRequest
    affinity: AffinityGroups | None  # its own groups; None: the broker's defaults apply
    anti_affinity_group: str | None


def namespace_of_topic(topic: str) -> str:
    """`tenant/ns/persistent/topic` -> `tenant/ns`; "" when the name has no namespace."""
    parts = topic.split("/")
    return "/".join(parts[:2]) if len(parts) >= 4 else NO_NAMESPACE


def place_of(topology: Topology, bookie: str) -> tuple[Any, ...]:
    """Everything about a bookie that a verdict on a fragment holding it depends on."""
    return (topology.location.get(bookie), topology.group_of.get(bookie),
            bookie in topology.writable, bookie in topology.read_only,
            topology.unplaceable.get(bookie))  # fmt: skip


def judge(
    record: LedgerRecord, topology: Topology, policy: NamespacePolicy | None,
    config: PlacementConfig,
) -> Verdict | None:
    """The ledger's first segment that breaks the namespace's current policy, with the
    engine's reasons; None when every segment adheres."""
    md = record.metadata
    affinity = policy.affinity if policy else None
    for first_entry, ensemble in sorted(md.ensembles.items()):
        verdict = check_fragment(topology, ensemble, md.write_quorum_size, md.ack_quorum_size,
                                 config, affinity=affinity)
        if verdict.violations:
            return {
                "ledgerId": md.ledger_id,
                "namespace": record.namespace or None,
                "topic": record.topic or None,
                "firstEntry": first_entry,
                "ensemble": list(ensemble),
                "kinds": kind_names(verdict.violations),
                "reasons": list(verdict.reasons),
            }
    return None


def judge_many(
    records: Mapping[int, LedgerRecord], topology: Topology,
    namespaces: Mapping[str, NamespacePolicy], config: PlacementConfig,
    batch_from: int = BATCH_JUDGEMENTS,
) -> dict[int, Verdict | None]:
    """`judge` of every record: from `batch_from` records on, the batch check over every
    segment, then `judge` again of the ledgers with a segment it finds breaking the policy
    (for the reasons)."""
    if len(records) < batch_from or config.mode is PlacementMode.ZONE:
        return {i: judge(r, topology, namespaces.get(r.namespace), config)
                for i, r in records.items()}  # fmt: skip
    bookie_index: dict[str, int] = {}
    policy_index: dict[AffinityGroups | None, int] = {None: 0}
    owners: list[int] = []
    rows: list[list[int]] = []
    write_quorum: list[int] = []
    ack_quorum: list[int] = []
    policy: list[int] = []
    for ledger_id, record in records.items():
        md = record.metadata
        ns = namespaces.get(record.namespace)
        affinity = ns.affinity if ns else None
        p = policy_index.setdefault(affinity, len(policy_index))
        for ensemble in md.ensembles.values():
            owners.append(ledger_id)
            rows.append([bookie_index.setdefault(b, len(bookie_index)) for b in ensemble])
            write_quorum.append(md.write_quorum_size)
            ack_quorum.append(md.ack_quorum_size)
            policy.append(p)
    out: dict[int, Verdict | None] = dict.fromkeys(records)
    width = max((len(r) for r in rows), default=0)
    if not rows or width == 0:
        return {i: judge(r, topology, namespaces.get(r.namespace), config)
                for i, r in records.items()}  # fmt: skip
    ensembles = np.full((len(rows), width), -1, np.int32)
    for n, row in enumerate(rows):
        ensembles[n, :len(row)] = row
    batch = BatchTopology.from_topology(topology, list(bookie_index))
    table = PolicyTable.build(list(policy_index), config, batch.groups)
    _, violations = check_batch(batch, table, config, ensembles, write_quorum, ack_quorum,
                                policy)
    owner = np.asarray(owners, np.int64)
    for ledger_id in np.unique(owner[violations != 0]).tolist():
        record = records[ledger_id]
        out[ledger_id] = judge(record, topology, namespaces.get(record.namespace), config)
    return out


@dataclass(frozen=True)
class GroupViewKey(MemoKey[tuple[frozenset[str], ...]]):
    """What the bookies a namespace may use depend on: placeable bookies, groups, known."""


def group_view(topology: Topology) -> tuple[frozenset[str], ...]:
    return topology.memo(GroupViewKey(), lambda: (
        frozenset(topology.bookies), frozenset(f"{b}\0{g}" for b, g in
                                               topology.group_of.items() if g is not None),
        topology.known))  # fmt: skip


class UsableBookies:
    """The writable bookies a new ledger of a namespace may use: the placement engine's allowed
    view for its groups and ensemble size, remembered across topologies that differ only in
    what it does not depend on (a rack write keeps every namespace's answer)."""

    LIMIT = 256

    def __init__(self) -> None:
        self.known: dict[tuple[Any, ...], frozenset[str]] = {}

    def of(
        self, topology: Topology, policy: NamespacePolicy | None, config: PlacementConfig
    ) -> frozenset[str]:
        groups = effective_groups(policy.affinity if policy else None, config)
        if groups is None:
            return frozenset(topology.bookies)
        size = (policy.request.ensemble_size if policy
                else config.managed_ledger_default_ensemble_size)
        key = (groups, size, group_view(topology))
        found = self.known.get(key)
        if found is None:
            if len(self.known) >= self.LIMIT:
                self.known.clear()
            found = self.known[key] = frozenset(allowed_view(topology, groups, size, config)
                                                .bookies)
        return found


class ConsoleLedgers:
    def __init__(self, store: MetadataStore, keys: VersionedKeys) -> None:
        self.store = store
        self.ledger_store = LedgerMetadataStore(keys)
        self.records: dict[int, LedgerRecord] = {}
        self.generation = 0  # counts changes of `records`
        self.judgements = 0  # counts the judgements kept that judged a ledger
        self.read = 0  # ledgers read by the running read
        self.total: int | None = None  # ledgers to read, once counted
        self._loaded = False
        self._loading: asyncio.Task[None] | None = None
        self._judging: asyncio.Task[None] | None = None
        self._follower: asyncio.Task[None] | None = None
        self._by_bookie: dict[str, set[int]] = {}
        self._by_namespace: dict[str, set[int]] = {}
        self._verdicts: dict[int, Verdict | None] = {}
        self._violations: dict[int, Verdict] = {}  # the violating ones of `_verdicts`
        self._unjudged: set[int] = set()  # ledgers without a verdict
        self._places: dict[str, tuple[Any, ...]] = {}
        self._policies: dict[str, NamespacePolicy | None] = {}
        self.usable = UsableBookies()
        self._counted: tuple[int, tuple[dict[str, int], dict[str, int], dict[str, int]]] = (
            -1, ({}, {}, {}))

    @property
    def loaded(self) -> bool:
        return self._loaded

    def start(self) -> None:
        """Read every ledger in the background (once; again after a failed or broken read)."""
        if self._loaded or (self._loading is not None and not self._loading.done()):
            return
        self._loading = asyncio.create_task(self._load(), name="console ledgers load")
        self._loading.add_done_callback(_log_failure)

    def progress(self) -> dict[str, Any]:
        """How far the read of every ledger is: `state` `ready` (read, followed by the watch)
        or `reading`, `read` ledgers of `total` (null until counted)."""
        if self._loaded:
            return {"state": "ready", "read": len(self.records), "total": len(self.records)}
        return {"state": "reading", "read": self.read, "total": self.total}

    async def wait_loaded(self, seconds: float) -> bool:
        """Start the read if need be and wait up to `seconds` for it; whether it is done."""
        self.start()
        if not self._loaded and self._loading is not None:
            with contextlib.suppress(Exception):  # a timeout, or a failed read (logged)
                await asyncio.wait_for(asyncio.shield(self._loading), seconds)
        return self._loaded

    async def current(self) -> Mapping[int, LedgerRecord]:
        """Every ledger, read now (in a task a request's deadline does not cancel) or kept up
        to date by the watch."""
        while not self._loaded:
            if self._loading is None or self._loading.done():
                self._loading = asyncio.create_task(self._load(), name="console ledgers load")
            await asyncio.shield(self._loading)
        return self.records

    async def stop(self) -> None:
        for task in (self._loading, self._judging, self._follower):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._loading = self._judging = self._follower = None

    async def _load(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follower
        self.read, self.total = 0, None
        revision = await self.store.revision()
        total = 0
        async for _ in self.ledger_store.ledger_ids(page_size=10 * READ_PAGE):
            total += 1
        self.total = total
        for ledger_id in list(self.records):
            self._drop(ledger_id)
        async for stored in self.ledger_store.ledgers(page_size=READ_PAGE):
            self._put(LedgerRecord.of(stored.metadata))
            self.read += 1
            if self.read > total:  # created since the count
                self.total = self.read
        self._loaded = True
        self._follower = asyncio.create_task(self._follow(revision + 1), name="console ledgers")

    async def _follow(self, start: int) -> None:
        try:
            stream = await self.store.watch_keys(paths.LEDGERS + "/", paths.LEDGERS + "0",
                                                 start_revision=start)
            async for event in stream:
                ledger_id = paths.ledger_id_of(event.path)
                if ledger_id is None:
                    continue
                self._drop(ledger_id)
                if event.value is not None:
                    try:
                        self._put(LedgerRecord.of(decode_ledger_metadata(ledger_id, event.value)))
                    except (MetastoreError, ValueError) as exc:
                        log.warning("ledger %d: unreadable metadata: %s", ledger_id, exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the watch broke: read everything again
            log.info("console ledger watch ended (%s); reading the ledgers again", exc)
        self._loaded = False
        self.start()

    def _put(self, record: LedgerRecord) -> None:
        ledger_id = record.metadata.ledger_id
        self.records[ledger_id] = record
        for bookie in record.members:
            self._by_bookie.setdefault(bookie, set()).add(ledger_id)
        self._by_namespace.setdefault(record.namespace, set()).add(ledger_id)
        self._unjudged.add(ledger_id)
        self.generation += 1

    def _drop(self, ledger_id: int) -> None:
        record = self.records.pop(ledger_id, None)
        self._verdicts.pop(ledger_id, None)
        self._violations.pop(ledger_id, None)
        self._unjudged.discard(ledger_id)
        if record is None:
            return
        for bookie in record.members:
            self._by_bookie.get(bookie, set()).discard(ledger_id)
        self._by_namespace.get(record.namespace, set()).discard(ledger_id)
        self.generation += 1

    def _affected(
        self, places: Mapping[str, tuple[Any, ...]],
        namespaces: Mapping[str, NamespacePolicy],
    ) -> set[int]:
        """Ledgers whose verdict may differ from the kept one under `places` and
        `namespaces`: never judged, a member's place changed, or their namespace's policy."""
        todo = set(self._unjudged)
        for bookie, place in places.items():
            if self._places.get(bookie) != place:
                todo |= self._by_bookie.get(bookie, set())
        for name in set(namespaces) | set(self._policies):
            if namespaces.get(name) != self._policies.get(name):
                todo |= self._by_namespace.get(name, set())
        return todo

    def _judged(
        self, topology: Topology, namespaces: Mapping[str, NamespacePolicy],
        config: PlacementConfig, records: Mapping[int, LedgerRecord],
    ) -> dict[int, Verdict | None]:
        return judge_many(records, topology, namespaces, config)

    async def _judge(
        self, topology: Topology, namespaces: Mapping[str, NamespacePolicy],
        config: PlacementConfig, ledger_ids: Iterable[int],
    ) -> dict[int, Verdict | None]:
        """Verdicts of these ledgers (of those that still exist), inline or in a thread."""
        records = {i: self.records[i] for i in ledger_ids if i in self.records}
        if len(records) <= INLINE_JUDGEMENTS:
            return self._judged(topology, namespaces, config, records)
        judged = await asyncio.to_thread(self._judged, topology, namespaces, config, records)
        # a ledger that changed meanwhile has no verdict now: it is judged next time
        return {i: v for i, v in judged.items() if self.records.get(i) is records[i]}

    async def _keep(
        self, topology: Topology, namespaces: Mapping[str, NamespacePolicy],
        config: PlacementConfig, places: dict[str, tuple[Any, ...]], ledger_ids: set[int],
    ) -> None:
        judged = await self._judge(topology, namespaces, config, ledger_ids)
        self._verdicts.update(judged)
        self._unjudged.difference_update(judged)
        for ledger_id, verdict in judged.items():
            if verdict is None:
                self._violations.pop(ledger_id, None)
            else:
                self._violations[ledger_id] = verdict
        self._places = places
        self._policies = dict(namespaces)
        if judged:
            self.judgements += 1

    async def verdicts(
        self, topology: Topology, namespaces: Mapping[str, NamespacePolicy],
        config: PlacementConfig, wait: float | None = None,
    ) -> dict[int, Verdict] | None:
        """Every violating ledger's verdict under this topology and these policies (kept);
        None when judging them takes longer than `wait` seconds (it goes on: a later call
        finds it done)."""
        deadline = None if wait is None else asyncio.get_running_loop().time() + wait
        while True:
            places = {b: place_of(topology, b) for b in self._by_bookie}
            todo = self._affected(places, namespaces)
            if len(todo) <= INLINE_JUDGEMENTS:
                await self._keep(topology, namespaces, config, places, todo)
                return dict(self._violations)
            if self._judging is None or self._judging.done():
                self._judging = asyncio.create_task(
                    self._keep(topology, namespaces, config, places, todo),
                    name="console judgement")
            if deadline is None:
                await asyncio.shield(self._judging)
                continue
            left = deadline - asyncio.get_running_loop().time()
            done, _ = await asyncio.wait({self._judging}, timeout=max(left, 0))
            if not done:
                return None
            self._judging.result()  # a failed judgement raises here

    async def what_if(
        self, topology: Topology, namespaces: Mapping[str, NamespacePolicy],
        config: PlacementConfig,
    ) -> dict[int, Verdict]:
        """Every violating ledger's verdict under a proposed topology or policies, judging
        only the ledgers the proposal touches; nothing is kept (call `verdicts` first)."""
        places = {b: place_of(topology, b) for b in self._by_bookie}
        changed = await self._judge(topology, namespaces, config,
                                    self._affected(places, namespaces))
        merged = dict(self._violations)
        for ledger_id, verdict in changed.items():
            if verdict is None:
                merged.pop(ledger_id, None)
            else:
                merged[ledger_id] = verdict
        return merged

    def counts(self) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        """Ledgers per bookie, topics per namespace and ledgers per namespace (recounted only
        after a ledger changed)."""
        if self._counted[0] != self.generation:
            per_bookie = {b: len(ids) for b, ids in self._by_bookie.items() if ids}
            topics: dict[str, set[str]] = {}
            for record in self.records.values():
                topics.setdefault(record.namespace, set()).add(record.topic)
            per_namespace = {n: len(ids) for n, ids in self._by_namespace.items() if ids}
            self._counted = (self.generation, (
                per_bookie, {n: len(t) for n, t in topics.items()}, per_namespace))
        return self._counted[1]


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("console ledgers: the read failed (%s); reading again on the next request",
                    task.exception())
