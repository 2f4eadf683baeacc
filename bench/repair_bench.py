"""Repair after losing one of six bookies: time to full replication, the copy rate against the
raw disk, and the producers' latency while it runs.

Six `python -m storage.bookie` processes on one etcd (each on its own rack, lease TTL
`--lease-ttl` s); ledgers with E=3/Qw=3/Qa=2 and 64 KiB entries are written until the cluster
holds `--size-mib` MiB of entries (each stored three times), and closed. Then:

1. baseline in the same run, same disk: the raw read-plus-write rate, a file as large as the
   lost bookie's share read in 1 MiB blocks and written to a new file with `fdatasync` every
   16 MiB (the bookies sync their journal before each acknowledgement);
2. a producer (one ledger on three bookies other than the victim, 1 KiB adds, 8 outstanding)
   runs for `--seconds` s with nothing failing: its p50/p99;
3. the victim is killed (-9) with the producer still running, and auto-recovery (the auditor
   and one replication worker, as the service runs them with `autoRecoveryDaemonEnabled`,
   upstream defaults except `lostBookieRecoveryDelay=0`) restores every ledger: the time from
   the kill to no mark left and no ensemble naming the victim, the time from the first entry
   copied to the end (the copy itself), the
   bytes the worker copied, and the producer's p50/p99 over the repair; CPU ms per MiB
   copied of this process (worker, auditor, producer client) and of the surviving bookies,
   with the producer's share estimated from its CPU per add before the loss;
4. the copy's stages alone between two survivors (producer stopped): 64 MiB read, added
   (RECOVERY_ADD), and copied (read, then add), `--batch` entries in flight, each with the
   CPU ms per MiB of the source bookie, the target bookie and this process.

    .venv/bin/python -m bench.repair_bench [--size-mib 1024] [--seconds 5] [--lease-ttl 2]
                                           [--batch 100]

About 45 s for 1 GiB on 2 cores (the fill included), 25 s for `--size-mib 256`. `--batch 100`
(the default) is Pulsar's shipped `rereplicationEntryBatchSize` and the service's default;
`--batch 10` is BookKeeper's code default.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import uvloop

from bench.bookie_bench import wait_ready
from bench.harness import REPO, cpu_seconds, machine, percentile
from metastore import paths
from metastore.embedded import EmbeddedEtcd, free_port
from metastore.store import MetadataStore, parse_metadata_store_url
from metastore.topology import read_cluster_view
from metastore.versioned_keys import VersionedKeys
from placement import PlacementConfig, Topology
from storage.autorecovery import (
    AutoRecovery,
    AutoRecoveryConfig,
    UnderReplication,
)
from storage.autorecovery.worker import in_window
from storage.bookie.format import package_entry
from storage.bookie_client import BookieClient
from storage.engine import build_ledger_client
from storage.ledger import BookiePool, LedgerClient, LedgerSpec, WriteHandle
from storage.ledger.handle import master_key

BOOKIES = 6
ENTRY = 64 * 1024
ENTRIES_PER_LEDGER = 256  # 16 MiB ledgers
PRODUCER_ENTRY = os.urandom(1024)
PRODUCER_OUTSTANDING = 8
MiB = 1024 * 1024
STAGE_ENTRIES = 1024  # 64 MiB for the stage measurement
STAGE_LEDGER = 1 << 40  # a ledger id no client allocates in the bench


@dataclass
class Stage:
    """One stage of the copy measured alone between two bookies, no producer running."""

    name: str
    seconds: float
    mib: float
    cpu_ms_per_mib: dict[str, float]  # "source", "target", "worker"

    @property
    def mib_s(self) -> float:
        return self.mib / self.seconds


@dataclass
class Outcome:
    size_mib: int
    victim_share_mib: float
    raw_mib_s: float
    restore_s: float
    copy_s: float
    copied_mib: float
    ledgers: int
    repaired_ledgers: int
    base_p50_ms: float
    base_p99_ms: float
    base_rate: float
    repair_p50_ms: float
    repair_p99_ms: float
    repair_rate: float
    batch: int
    # CPU seconds per MiB copied during the repair: this process (worker, auditor and the
    # producer's client) and the surviving bookies together; `*_producer` is the producer's
    # share, estimated from the CPU per add of the baseline phase times the adds made
    worker_cpu_ms: float = 0.0
    worker_producer_ms: float = 0.0
    bookies_cpu_ms: float = 0.0
    bookies_producer_ms: float = 0.0
    stages: list[Stage] | None = None

    @property
    def copy_mib_s(self) -> float:
        return self.copied_mib / self.copy_s

    @property
    def restore_mib_s(self) -> float:
        return self.copied_mib / self.restore_s


def progress(text: str) -> None:
    print(f"[repair_bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def raw_copy_rate(workdir: Path, size: int) -> float:
    """MiB/s of reading a file and writing it to another, syncing every 16 MiB."""
    src, dst = workdir / "raw-src", workdir / "raw-dst"
    block = os.urandom(MiB)
    with open(src, "wb") as out:
        for _ in range(size // MiB):
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    started = time.perf_counter()
    with open(src, "rb") as source, open(dst, "wb") as out:
        copied = 0
        while chunk := source.read(MiB):
            out.write(chunk)
            copied += len(chunk)
            if copied % (16 * MiB) == 0:
                out.flush()
                os.fdatasync(out.fileno())
        out.flush()
        os.fdatasync(out.fileno())
    elapsed = time.perf_counter() - started
    src.unlink()
    dst.unlink()
    return size / MiB / elapsed


class Producer:
    """A closed loop of adds on one ledger; latencies kept per phase."""

    def __init__(self, handle: WriteHandle) -> None:
        self.handle = handle
        self.phase: list[float] = []
        self.count = 0
        self._stop = asyncio.Event()

    def next_phase(self) -> tuple[list[float], int]:
        latencies, count = self.phase, self.count
        self.phase, self.count = [], 0
        return latencies, count

    async def run(self) -> None:
        async def one() -> None:
            while not self._stop.is_set():
                t0 = time.perf_counter()
                await self.handle.add(PRODUCER_ENTRY)
                self.phase.append(time.perf_counter() - t0)
                self.count += 1

        await asyncio.gather(*(one() for _ in range(PRODUCER_OUTSTANDING)))

    def stop(self) -> None:
        self._stop.set()


async def fill(client: LedgerClient, size_mib: int) -> list[int]:
    """Ledgers of 64 KiB entries until `size_mib` MiB are written; four written at once."""
    rng = random.Random(1)
    payload = rng.randbytes(ENTRY)
    total = size_mib * MiB // ENTRY
    ledgers: list[int] = []

    async def one_ledger(entries: int) -> None:
        handle = await client.create(LedgerSpec(3, 3, 2, {"application": b"repair-bench"}))
        ledgers.append(handle.ledger_id)
        for start in range(0, entries, 16):
            await asyncio.gather(*(handle.add_nowait(payload)
                                   for _ in range(min(16, entries - start))))
        await handle.close()

    sizes = [min(ENTRIES_PER_LEDGER, total - i) for i in range(0, total, ENTRIES_PER_LEDGER)]
    for i in range(0, len(sizes), 4):
        await asyncio.gather(*(one_ledger(n) for n in sizes[i:i + 4]))
    return ledgers


async def measure(etcd_url: str, processes: dict[str, subprocess.Popen[bytes]],
                  workdir: Path, size_mib: int, seconds: float, batch: int) -> Outcome:
    config = PlacementConfig()
    store = MetadataStore(parse_metadata_store_url(etcd_url))

    async def topology() -> Topology:
        return (await read_cluster_view(store, config)).topology

    client = build_ledger_client(store, BookiePool(BookieClient.connect), topology, config,
                                 random.Random(2))
    keys = VersionedKeys(parse_metadata_store_url(etcd_url))
    recovery: AutoRecovery | None = None
    producer_task: asyncio.Task[None] | None = None
    try:
        ledgers = await fill(client, size_mib)
        progress(f"wrote {size_mib} MiB in {len(ledgers)} ledgers")
        ensembles = {lid: (await client.read_metadata(lid)).current_ensemble for lid in ledgers}
        victim = max(processes, key=lambda b: sum(b in e for e in ensembles.values()))
        holding = [lid for lid, e in ensembles.items() if victim in e]
        for _ in range(50):  # the producer's ledger on three other bookies
            handle = await client.create(LedgerSpec(3, 3, 2, {"application": b"producer"}))
            if victim not in handle.metadata.current_ensemble:
                break
            await handle.close()
        else:
            raise RuntimeError("no producer ledger without the victim")
        share = len(holding) * ENTRIES_PER_LEDGER * ENTRY / MiB  # upper bound: full ledgers
        raw = raw_copy_rate(workdir, max(64, int(share)) * MiB)
        progress(f"raw read+write {raw:.1f} MiB/s; victim {victim} in {len(holding)} ledgers")

        survivors = {b: p for b, p in processes.items() if b != victim}

        def cpu() -> tuple[float, float]:
            """(this process, the survivors together) CPU seconds so far."""
            return time.process_time(), sum(cpu_seconds(p.pid) for p in survivors.values())

        producer = Producer(handle)
        producer_task = asyncio.create_task(producer.run())
        cpu_base = cpu()
        await asyncio.sleep(seconds)
        base, base_count = producer.next_phase()
        cpu_killed = cpu()
        base_elapsed = seconds

        recovery = AutoRecovery(keys, client, AutoRecoveryConfig(
            autoRecoveryDaemonEnabled=True, lostBookieRecoveryDelay=0,
            rereplicationEntryBatchSize=batch), "bench:0", tick=0.1)
        recovery.start()
        marks = UnderReplication(keys)
        killed = time.perf_counter()
        processes[victim].kill()
        first_mark: float | None = None
        shown = 0.0
        deadline = time.perf_counter() + 3600
        while time.perf_counter() < deadline:
            pending = await marks.marks()
            if time.perf_counter() - shown > 5:
                shown = time.perf_counter()
                progress(f"{len(pending)} marked, {recovery.worker.copied_bytes / MiB:.0f} MiB "
                         f"copied, stuck: {recovery.worker.stuck}")
            if first_mark is None and recovery.worker.copied_bytes > 0:
                # The copy has started: the first entry reached the new bookie (polled every
                # 50 ms). Marks come first from the auditor's all-ledgers check, which cannot
                # read the killed bookie (the worker reads the replicas it names and repairs
                # at once), or from the bookie audit once the registration has expired.
                first_mark = time.perf_counter()
            if first_mark is not None and not pending:
                left = [lid for lid in holding
                        if victim in {b for e in (await client.read_metadata(lid)).ensembles
                                      .values() for b in e}]
                if not left:
                    break
            await asyncio.sleep(0.05)
        else:
            raise RuntimeError("the repair did not finish within an hour")
        done = time.perf_counter()
        cpu_done = cpu()
        during, during_count = producer.next_phase()
        producer.stop()
        await producer_task
        producer_task = None
        await handle.close()
        worker = recovery.worker
        copied = worker.copied_bytes / MiB
        per_add = [(cpu_killed[i] - cpu_base[i]) / max(1, base_count) for i in (0, 1)]
        await recovery.stop()
        recovery = None
        source, target = sorted(survivors)[:2]
        stages = await copy_stages(source, target, {source: survivors[source].pid,
                                                    target: survivors[target].pid}, batch)
        return Outcome(
            size_mib=size_mib, victim_share_mib=share, raw_mib_s=raw,
            restore_s=done - killed, copy_s=done - (first_mark or killed),
            copied_mib=worker.copied_bytes / MiB, ledgers=len(ledgers),
            repaired_ledgers=worker.replicated_ledgers,
            base_p50_ms=percentile(base, 50) * 1e3, base_p99_ms=percentile(base, 99) * 1e3,
            base_rate=base_count / base_elapsed,
            repair_p50_ms=percentile(during, 50) * 1e3,
            repair_p99_ms=percentile(during, 99) * 1e3,
            repair_rate=during_count / (done - killed), batch=batch,
            worker_cpu_ms=(cpu_done[0] - cpu_killed[0]) * 1e3 / copied,
            worker_producer_ms=per_add[0] * during_count * 1e3 / copied,
            bookies_cpu_ms=(cpu_done[1] - cpu_killed[1]) * 1e3 / copied,
            bookies_producer_ms=per_add[1] * during_count * 1e3 / copied,
            stages=stages,
        )
    finally:
        if producer_task is not None:
            producer_task.cancel()
            with contextlib.suppress(BaseException):
                await producer_task
        if recovery is not None:
            await recovery.stop()
        await keys.close()
        await client.close()
        await store.close()


async def copy_stages(source: str, target: str, pids: dict[str, int],
                      window: int) -> list[Stage]:
    """The copy's stages alone, between two surviving bookies after the repair (producer
    stopped): 64 MiB of 64 KiB entries read from `source`, added to `target` (RECOVERY_ADD,
    acknowledged after its fdatasync), and both (the worker's copy: read, then add), each
    with `window` entries in flight; wall time and CPU ms per MiB of each process."""
    key = master_key(b"")
    payload = random.Random(3).randbytes(ENTRY)
    src = await BookieClient.connect(source)
    dst = await BookieClient.connect(target)
    held: dict[int, bytes] = {}
    try:
        entries = list(range(STAGE_ENTRIES))
        await in_window(lambda e: src.add(STAGE_LEDGER, e, key, package_entry(
            STAGE_LEDGER, e, e - 1, (e + 1) * ENTRY, payload)), entries, 16)

        async def read(e: int) -> None:
            held[e] = await src.read(STAGE_LEDGER, e)

        async def add(e: int) -> None:
            await dst.add(STAGE_LEDGER, e, key, held[e], recovery=True)

        async def copy(e: int) -> None:  # the target stores each entry again
            await dst.add(STAGE_LEDGER, e, key, await src.read(STAGE_LEDGER, e),
                          recovery=True)

        stages = []
        for name, work in (("read from the source", read), ("add to the target", add),
                           ("copy (read, then add)", copy)):
            before = (cpu_seconds(pids[source]), cpu_seconds(pids[target]),
                      time.process_time())
            started = time.perf_counter()
            await in_window(work, entries, window)
            seconds = time.perf_counter() - started
            after = (cpu_seconds(pids[source]), cpu_seconds(pids[target]), time.process_time())
            mib = STAGE_ENTRIES * ENTRY / MiB
            stages.append(Stage(name, seconds, mib, {
                who: (after[i] - before[i]) * 1e3 / mib
                for i, who in enumerate(("source", "target", "worker"))}))
        return stages
    finally:
        await src.close()
        await dst.close()


def run(size_mib: int = 1024, seconds: float = 5.0, lease_ttl: int = 2,
        batch: int = 100) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="repair-bench-", dir=REPO) as tmp:
        workdir = Path(tmp)
        etcd = EmbeddedEtcd(workdir / "etcd")
        etcd.start()
        processes: dict[str, subprocess.Popen[bytes]] = {}
        try:
            racks: dict[str, dict[str, str]] = {}
            for i in range(BOOKIES):
                address = f"127.0.0.1:{free_port()}"
                command = [
                    sys.executable, "-m", "storage.bookie", "--bookie-id", address,
                    "--data-dir", str(workdir / f"bookie{i}"), "--metadata-store-url", etcd.url,
                    "--lease-ttl", str(lease_ttl),
                ]  # fmt: skip
                with open(workdir / f"bookie{i}.log", "ab") as log:
                    processes[address] = subprocess.Popen(command, cwd=REPO, stdout=log,
                                                          stderr=log)
                racks[address] = {"rack": f"/rack{i}"}
            for address in processes:
                asyncio.run(wait_ready(address))
            asyncio.run(_put_racks(etcd.url, {"default": racks}))
            return uvloop.run(measure(etcd.url, processes, workdir, size_mib, seconds, batch))
        finally:
            for process in processes.values():
                process.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=30)
            etcd.stop()


async def _put_racks(etcd_url: str, doc: dict[str, dict[str, dict[str, str]]]) -> None:
    store = MetadataStore(parse_metadata_store_url(etcd_url))
    try:
        await store.put(paths.BOOKIES_RACK_CONFIG, json.dumps(doc).encode())
    finally:
        await store.close()


def report(o: Outcome, load_before: tuple[float, float, float] | None = None) -> str:
    loads = f"load average {os.getloadavg()[0]:.1f} at the end"
    if load_before is not None:
        loads = f"load average {load_before[0]:.1f} at the start, " + loads
    lines = [
        f"Machine: {machine()}; {loads}",
        "",
        f"rereplicationEntryBatchSize {o.batch} (entries in flight)",
        "",
        "| written (stored x3) | ledgers | lost bookie's share | restore from kill "
        "| copy from first entry copied "
        "| copied | copy rate | raw read+write | copy / raw |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {o.size_mib} MiB | {o.ledgers} | {o.victim_share_mib:.0f} MiB in "
        f"{o.repaired_ledgers} ledgers | {o.restore_s:.1f} s | {o.copy_s:.1f} s "
        f"| {o.copied_mib:.0f} MiB | {o.copy_mib_s:.1f} MiB/s | {o.raw_mib_s:.1f} MiB/s "
        f"| **{o.copy_mib_s / o.raw_mib_s:.0%}** |",
        "",
        "| producer (1 KiB adds, 8 outstanding, E=3/Qw=3/Qa=2) | adds/s | p50 ms | p99 ms |",
        "|---|---|---|---|",
        f"| before the loss | {o.base_rate:,.0f} | {o.base_p50_ms:.1f} | {o.base_p99_ms:.1f} |",
        f"| during the repair | {o.repair_rate:,.0f} | {o.repair_p50_ms:.1f} "
        f"| {o.repair_p99_ms:.1f} |",
        "",
        "| CPU ms per MiB copied, kill to done | all | producer's share (est.) | repair |",
        "|---|---|---|---|",
        f"| this process (worker, auditor, producer) | {o.worker_cpu_ms:.1f} "
        f"| {o.worker_producer_ms:.1f} | {o.worker_cpu_ms - o.worker_producer_ms:.1f} |",
        f"| the five surviving bookies | {o.bookies_cpu_ms:.1f} "
        f"| {o.bookies_producer_ms:.1f} | {o.bookies_cpu_ms - o.bookies_producer_ms:.1f} |",
    ]
    if o.stages:
        lines += [
            "",
            f"Stages alone (64 MiB between two survivors after the repair, {o.batch} in "
            "flight, no producer):",
            "",
            "| stage | MiB/s | CPU ms/MiB source bookie | target bookie | worker |",
            "|---|---|---|---|---|",
            *(f"| {st.name} | {st.mib_s:.1f} | {st.cpu_ms_per_mib['source']:.1f} "
              f"| {st.cpu_ms_per_mib['target']:.1f} | {st.cpu_ms_per_mib['worker']:.1f} |"
              for st in o.stages),
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.repair_bench")
    parser.add_argument("--size-mib", type=int, default=1024,
                        help="MiB of entries the cluster holds before the loss (default 1024)")
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="the producer's baseline phase")
    parser.add_argument("--lease-ttl", type=int, default=2,
                        help="the bookies' registration lease: how soon a loss is seen")
    parser.add_argument("--batch", type=int, default=100,
                        help="rereplicationEntryBatchSize (default 100 as Pulsar ships it; "
                             "BookKeeper's own default is 10)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    outcome = run(args.size_mib, args.seconds, args.lease_ttl, args.batch)
    print(report(outcome, load_before))


if __name__ == "__main__":
    main()
