"""Builders for the fault tests: a storage cluster of its own (etcd + bookie processes in one
strict group), a producer that records what was pushed and what was acknowledged, and the
checks (full replication byte for byte, the safety invariants)."""

from __future__ import annotations

import asyncio
import json
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from metastore import paths
from metastore.embedded import EmbeddedEtcd
from metastore.ledger_metadata import decode_ledger_metadata
from placement import AffinityGroups, write_set
from storage.autorecovery import AutoRecoveryConfig
from storage.bookie.format import entry_payload
from storage.bookie.registration import FORCE_READONLY_FILE
from storage.bookie_client import BookieClient
from storage.ledger import LedgerMetadata, LedgerSpec, LedgerState, WriteHandle
from storage.ledger.metadata import managed_ledger_custom_metadata
from tests.storage.bookie.support import BookieProcess
from tests.support import RawEtcd

T = TypeVar("T")

FAST = AutoRecoveryConfig(
    autoRecoveryDaemonEnabled=True,
    openLedgerRereplicationGracePeriod=1000,
    lockReleaseOfFailedLedgerGracePeriod=1000,
    rwRereplicateBackoffMs=500,
    metadataStoreSessionTimeoutMillis=2000,
)


@dataclass
class Group:
    """Bookie processes in one strict affinity group of the rack map (each on its own rack),
    plus optional outsiders in another group: a placement outside the group is a bug."""

    etcd: EmbeddedEtcd
    raw: RawEtcd
    workdir: Path
    name: str
    members: list[BookieProcess] = field(default_factory=list)
    outsiders: list[BookieProcess] = field(default_factory=list)

    @property
    def groups(self) -> AffinityGroups:
        return AffinityGroups((self.name,), strict=True)

    @property
    def allowed(self) -> set[str]:
        return {b.bookie_id for b in self.members}

    def by_id(self, bookie_id: str) -> BookieProcess:
        return next(b for b in self.members + self.outsiders if b.bookie_id == bookie_id)

    def add(self, count: int, *, outside: bool = False, lease_ttl: int = 2) -> list[BookieProcess]:
        first = len(self.members) + len(self.outsiders)
        new = [BookieProcess(self.raw, self.etcd.url, self.workdir / f"{self.name}-{first + i}",
                             lease_ttl=lease_ttl) for i in range(count)]
        for bookie in new:
            bookie.start()
        (self.outsiders if outside else self.members).extend(new)
        self.write_rack_map()
        return new

    def write_rack_map(self) -> None:
        doc = {
            self.name: {b.bookie_id: {"rack": f"/{self.name}{i}"}
                        for i, b in enumerate(self.members)},
            f"{self.name}-outside": {b.bookie_id: {"rack": f"/out{i}"}
                                     for i, b in enumerate(self.outsiders)},
        }
        self.raw.put("/bookies", json.dumps(doc))

    def stop_all(self) -> None:
        for bookie in self.members + self.outsiders:
            if bookie.process is not None and bookie.process.poll() is None:
                bookie.process.send_signal(signal.SIGCONT)
            bookie.kill()

    def spec(self, topic: str = "t/ns/persistent/chaos") -> LedgerSpec:
        return LedgerSpec(3, 3, 2, managed_ledger_custom_metadata(topic, self.groups),
                          self.groups)


def set_readonly(bookie: BookieProcess, readonly: bool) -> None:
    """Force a running bookie read-only (or back) through its flag file and SIGUSR1."""
    flag = bookie.data_dir / FORCE_READONLY_FILE
    if readonly:
        flag.touch()
    else:
        flag.unlink(missing_ok=True)
    assert bookie.process is not None
    bookie.process.send_signal(signal.SIGUSR1)


def stored(raw: RawEtcd, ledger_id: int) -> LedgerMetadata:
    value = raw.get(paths.ledger(ledger_id))
    assert value is not None, f"ledger {ledger_id} has no metadata"
    return decode_ledger_metadata(ledger_id, value)


@dataclass
class Produced:
    """What a producer pushed to each ledger and what was acknowledged."""

    pushed: dict[int, dict[int, bytes]] = field(default_factory=dict)
    acked: dict[int, set[int]] = field(default_factory=dict)

    def push(self, handle: WriteHandle, payload: bytes) -> asyncio.Future[int]:
        ledger = handle.ledger_id
        entry_id = handle.last_add_pushed + 1
        future = handle.add_nowait(payload)
        if handle.last_add_pushed == entry_id:  # accepted (not a closed or broken handle)
            self.pushed.setdefault(ledger, {})[entry_id] = payload

            def done(f: asyncio.Future[int]) -> None:
                if not f.cancelled() and f.exception() is None:
                    assert f.result() == entry_id
                    self.acked.setdefault(ledger, set()).add(entry_id)

            future.add_done_callback(done)
        else:
            future.add_done_callback(lambda f: f.exception())  # retrieved: no warning
        return future


async def replication_gaps(raw: RawEtcd, produced: Produced, allowed: set[str],
                           gone: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """What keeps the produced ledgers from full replication on allowed, live bookies: for
    each CLOSED ledger, every entry 0..lastEntryId on every bookie of its write set, byte for
    byte what was pushed, every ensemble inside `allowed` (else AssertionError), registered
    and without a `gone` bookie, no mark left.
    Also: every acknowledged entry is inside the closed range."""
    live = {k.rsplit("/", 1)[-1] for k in raw.keys(paths.bookie_available(""))} - gone
    gaps: list[str] = []
    connections: dict[str, BookieClient] = {}
    try:
        await _check_ledgers(raw, produced, allowed, live, gaps, connections)
    finally:
        for connection in connections.values():
            await connection.close()
    return gaps


async def _check_ledgers(raw: RawEtcd, produced: Produced, allowed: set[str], live: set[str],
                         gaps: list[str], connections: dict[str, BookieClient]) -> None:
    for ledger_id, pushed in sorted(produced.pushed.items()):
        md = stored(raw, ledger_id)
        if md.state is not LedgerState.CLOSED:
            gaps.append(f"L{ledger_id} is {md.state.name}")
            continue
        if max(produced.acked.get(ledger_id, {-1}), default=-1) > md.last_entry_id:
            raise AssertionError(f"L{ledger_id} closed at {md.last_entry_id} below an "
                                 f"acknowledged entry: {sorted(produced.acked[ledger_id])}")
        if raw.get(paths.underreplicated_ledger(ledger_id)) is not None:
            gaps.append(f"L{ledger_id} still marked")
        starts = sorted(md.ensembles)
        for k, start in enumerate(starts):
            ensemble = md.ensembles[start]
            if not set(ensemble) <= allowed:
                raise AssertionError(f"L{ledger_id} segment {start} {ensemble} outside "
                                     f"{sorted(allowed)}")
            if not set(ensemble) <= live:
                gaps.append(f"L{ledger_id} segment {start} {ensemble} has a lost bookie")
                continue
            end = starts[k + 1] - 1 if k + 1 < len(starts) else md.last_entry_id
            for entry_id in range(start, end + 1):
                for index in write_set(entry_id, md.ensemble_size, md.write_quorum_size):
                    bookie = ensemble[index]
                    try:
                        if bookie not in connections:
                            connections[bookie] = await BookieClient.connect(bookie, timeout=5)
                        data = entry_payload(await connections[bookie].read(ledger_id,
                                                                            entry_id))
                    except Exception as exc:  # reported as a gap
                        gaps.append(f"L{ledger_id} E{entry_id} on {bookie}: "
                                    f"{type(exc).__name__}")
                        break
                    if data != pushed.get(entry_id):
                        raise AssertionError(f"L{ledger_id} E{entry_id} on {bookie} differs "
                                             "from what was pushed")
