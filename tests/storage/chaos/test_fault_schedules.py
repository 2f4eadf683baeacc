"""Seeded random fault schedules with the safety invariants checked after every step.

A cluster of its own per seed: an etcd this test owns (so it can SIGSTOP it), five bookies in a
strict group plus one writable outsider, the service (`python -m api`, auto-recovery on) and a
producer in the test (E=3/Qw=3/Qa=2, a new ledger every ROLL entries). Each step applies one
fault drawn from the seed (stop -9 / start a bookie, make one read-only / writable again, kill
-9 and restart the service, pause etcd while producing) then produces a burst, and checks:

- no acknowledged entry lost: each reads back byte for byte (from the metadata as stored now);
- the LAC never goes back: the writer's LAC only grows, and a closed ledger's last entry is at
  least every LAC and every acknowledged entry seen;
- a closed ledger never changes: its state, last entry, length, custom metadata, segment
  starts and every entry's bytes stay as when it was first seen closed (only the bookies of a
  segment may change, by repair);
- every ensemble of every ledger lies inside the recorded policy's allowed set (the group).

At most one group bookie is stopped and one read-only at a time, so three stay writable and
every acknowledged entry keeps a live replica: a failure to read one back is a loss.
A failure prints the seed and the steps; `CHAOS_SEED=<n>` replays one seed,
`CHAOS_SEEDS=<count>` and `CHAOS_STEPS=<count>` run more (default: 2 seeds of 6 steps).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from metastore.embedded import EmbeddedEtcd
from metastore.errors import Unavailable
from placement import NotEnoughBookies
from storage.ledger import LedgerError, LedgerMetadata, LedgerState, ReadableLedger, WriteHandle
from storage.ledger.recovery import recover
from tests.storage.chaos.support import Group, Produced, set_readonly, stored
from tests.storage.testbed import Cluster, Engine, engine
from tests.support import RawEtcd, ServerProcess, pause

ROLL = 30
BURST = 12
SERVICE_CONF = {
    "autoRecoveryDaemonEnabled": "true",
    "lostBookieRecoveryDelay": "0",
    "openLedgerRereplicationGracePeriod": "2000",
    "lockReleaseOfFailedLedgerGracePeriod": "1000",
    "rwRereplicateBackoffMs": "500",
    "metadataStoreSessionTimeoutMillis": "2000",
}
# what a fault may make a producer's close, create or recovery fail with (retried later)
EXPECTED = (LedgerError, TimeoutError, Unavailable, NotEnoughBookies)


def seeds() -> list[int]:
    if "CHAOS_SEED" in os.environ:
        return [int(os.environ["CHAOS_SEED"])]
    return list(range(1, 1 + int(os.environ.get("CHAOS_SEEDS", "2"))))


@dataclass(frozen=True)
class ClosedImage:
    last_entry_id: int
    length: int
    custom_metadata: tuple[tuple[str, bytes], ...]
    starts: tuple[int, ...]
    entries: tuple[bytes, ...]


@dataclass
class World:
    etcd: EmbeddedEtcd
    raw: RawEtcd
    group: Group
    service: ServerProcess
    rng: random.Random
    produced: Produced = field(default_factory=Produced)
    stopped: set[str] = field(default_factory=set)
    readonly: set[str] = field(default_factory=set)
    lac: dict[int, int] = field(default_factory=dict)
    closed: dict[int, ClosedImage] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)

    def choose(self) -> tuple[str, str | None]:
        """The next fault: only those the limits allow, drawn from the seed."""
        members = [b.bookie_id for b in self.group.members]  # in start order: a replay
        running = [b for b in members if b not in self.stopped]  # picks the same ones
        options: list[tuple[str, str | None]] = [("kill-service", None), ("pause-etcd", None)]
        if not self.stopped:
            options += [("stop", b) for b in running]
        options += [("start", b) for b in members if b in self.stopped]
        if not self.readonly:
            options += [("readonly", b) for b in running]
        options += [("writable", b) for b in members
                    if b in self.readonly and b not in self.stopped]
        return options[self.rng.randrange(len(options))]

    def describe(self, action: str, bookie: str | None) -> str:
        if bookie is None:
            return action
        index = [b.bookie_id for b in self.group.members].index(bookie)
        return f"{action} bookie#{index} ({bookie})"


class Producer:
    def __init__(self, world: World, running: Engine) -> None:
        self.world = world
        self.running = running
        self.handle: WriteHandle | None = None
        self.open_ledgers: set[int] = set()  # broken handles' ledgers not yet recovered
        self.payloads = random.Random(world.rng.random())
        self.op_timeout = 10.0  # for a close, create or recovery (short while etcd is paused)

    async def burst(self, count: int, timeout: float) -> None:
        futures = []
        for _ in range(count):
            handle = await self._writable()
            if handle is None:
                return
            futures.append(self.world.produced.push(handle, self.payloads.randbytes(
                self.payloads.randint(1, 300))))
        if futures:
            await asyncio.wait(futures, timeout=timeout)
        if self.handle is not None:
            self._note_lac(self.handle)

    def _note_lac(self, handle: WriteHandle) -> None:
        before = self.world.lac.get(handle.ledger_id, -1)
        assert handle.last_add_confirmed >= before, \
            f"L{handle.ledger_id} LAC went back from {before} to {handle.last_add_confirmed}"
        self.world.lac[handle.ledger_id] = handle.last_add_confirmed

    async def _writable(self) -> WriteHandle | None:
        handle = self.handle
        if handle is not None and handle.is_broken:
            self._note_lac(handle)
            self.open_ledgers.add(handle.ledger_id)
            self.handle = handle = None
        if handle is not None and handle.last_add_pushed + 1 >= ROLL:
            self._note_lac(handle)
            try:
                await asyncio.wait_for(handle.close(), self.op_timeout)
            except EXPECTED:
                self.open_ledgers.add(handle.ledger_id)
            self.handle = handle = None
        if handle is None:
            await self.recover_open()
            try:
                self.handle = await asyncio.wait_for(
                    self.running.client.create(self.world.group.spec()), self.op_timeout)
            except EXPECTED as exc:
                self.world.steps.append(f"  (create failed: {type(exc).__name__})")
                return None
        return self.handle

    async def recover_open(self) -> None:
        """What a managed ledger does for its previous ledger: recover (fence, close) it."""
        for ledger_id in sorted(self.open_ledgers):
            with contextlib.suppress(*EXPECTED):
                md = await asyncio.wait_for(recover(self.running.client, ledger_id),
                                            self.op_timeout)
                if md.state is LedgerState.CLOSED:
                    self.open_ledgers.discard(ledger_id)


async def apply(world: World, producer: Producer, action: str, bookie: str | None) -> None:
    group = world.group
    if action == "stop" and bookie:
        group.by_id(bookie).kill()
        world.stopped.add(bookie)
        world.readonly.discard(bookie)
    elif action == "start" and bookie:
        target = group.by_id(bookie)
        (target.data_dir / "force-readonly").unlink(missing_ok=True)
        await asyncio.to_thread(target.start)
        world.stopped.discard(bookie)
    elif action == "readonly" and bookie:
        set_readonly(group.by_id(bookie), True)
        world.readonly.add(bookie)
    elif action == "writable" and bookie:
        set_readonly(group.by_id(bookie), False)
        world.readonly.discard(bookie)
    elif action == "kill-service":
        world.service.kill()
        await asyncio.to_thread(world.service.start)
    elif action == "pause-etcd":
        assert world.etcd.process is not None
        pause(world.etcd.process)
        producer.op_timeout = 0.5
        try:
            await producer.burst(BURST, timeout=1.5)
        finally:
            world.etcd.process.send_signal(signal.SIGCONT)
            producer.op_timeout = 10.0


async def check_invariants(world: World, running: Engine) -> None:
    allowed = world.group.allowed
    bookies = running.client.bookies
    for ledger_id, pushed in sorted(world.produced.pushed.items()):
        md = stored(world.raw, ledger_id)
        for start, ensemble in md.ensembles.items():
            assert set(ensemble) <= allowed, \
                f"L{ledger_id} segment {start} {ensemble} outside the group {sorted(allowed)}"
        reader = ReadableLedger(md, bookies)
        for entry_id in sorted(world.produced.acked.get(ledger_id, ())):
            try:
                entry = await reader.read_unchecked(entry_id)
            except LedgerError as exc:
                raise AssertionError(f"L{ledger_id} acknowledged E{entry_id} lost: {exc}") \
                    from None
            assert entry.payload == pushed[entry_id], f"L{ledger_id} E{entry_id} differs"
        if md.state is LedgerState.CLOSED:
            await check_closed(world, md, reader)


async def check_closed(world: World, md: LedgerMetadata, reader: ReadableLedger) -> None:
    ledger_id = md.ledger_id
    top = max([world.lac.get(ledger_id, -1), *world.produced.acked.get(ledger_id, ())])
    assert md.last_entry_id >= top, \
        f"L{ledger_id} closed at {md.last_entry_id}, below LAC/acknowledged {top}"
    entries = tuple([(await reader.read(e)).payload for e in range(md.last_entry_id + 1)])
    pushed = world.produced.pushed.get(ledger_id, {})
    for entry_id, payload in enumerate(entries):  # recovered tails included: only our bytes
        assert payload == pushed.get(entry_id), f"closed L{ledger_id} E{entry_id} not pushed"
    image = ClosedImage(md.last_entry_id, md.length, tuple(sorted(md.custom_metadata.items())),
                        tuple(sorted(md.ensembles)), entries)
    first = world.closed.setdefault(ledger_id, image)
    assert image == first, f"closed L{ledger_id} changed: {first} -> {image}"


async def run_schedule(seed: int, steps: int, workdir: Path) -> None:
    etcd = EmbeddedEtcd(workdir / "etcd")
    etcd.start()
    raw = RawEtcd(etcd.endpoint)
    group = Group(etcd, raw, workdir, "chaos")
    service = ServerProcess(etcd.url, workdir / "service", extra_conf=SERVICE_CONF,
                            extra_args=["--data-dir", str(workdir / "service-data")])
    world = World(etcd, raw, group, service, random.Random(seed))
    try:
        await asyncio.to_thread(group.add, 5, lease_ttl=3)
        await asyncio.to_thread(group.add, 1, outside=True, lease_ttl=3)
        await asyncio.to_thread(service.start)
        async with engine(Cluster(etcd, raw, []), seed=seed) as running:
            producer = Producer(world, running)
            try:
                await producer.burst(BURST, timeout=10)
                for _ in range(steps):
                    action, bookie = world.choose()
                    world.steps.append(world.describe(action, bookie))
                    await apply(world, producer, action, bookie)
                    await producer.burst(BURST, timeout=10)
                    await check_invariants(world, running)
                world.steps.append("heal")  # everything back, then a last look
                for bookie in sorted(world.stopped):
                    await apply(world, producer, "start", bookie)
                for bookie in sorted(world.readonly):
                    await apply(world, producer, "writable", bookie)
                await producer.burst(BURST, timeout=10)
                if producer.handle is not None:
                    producer.open_ledgers.add(producer.handle.ledger_id)
                    with contextlib.suppress(*EXPECTED):
                        await asyncio.wait_for(producer.handle.close(), 10)
                await producer.recover_open()
                await check_invariants(world, running)
                assert sum(map(len, world.produced.acked.values())) > 0
            except Exception as exc:
                raise AssertionError(f"seed {seed} failed after steps {world.steps}: "
                                     f"{type(exc).__name__}: {exc}\n"
                                     f"replay: CHAOS_SEED={seed} CHAOS_STEPS={steps} "
                                     "pytest tests/storage/chaos/test_fault_schedules.py") \
                    from exc
    finally:
        if etcd.process is not None and etcd.process.poll() is None:
            etcd.process.send_signal(signal.SIGCONT)
        service.kill()
        group.stop_all()
        etcd.stop()


@pytest.mark.slow
@pytest.mark.parametrize("seed", seeds())
async def test_random_fault_schedule_keeps_the_safety_invariants(seed: int,
                                                                  tmp_path: Path) -> None:
    await run_schedule(seed, int(os.environ.get("CHAOS_STEPS", "6")), tmp_path)
