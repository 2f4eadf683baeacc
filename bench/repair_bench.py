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
   the kill to no mark left and no ensemble naming the victim, the time from the first mark
   (the copy itself), the bytes the worker copied, and the producer's p50/p99 over the repair.

    .venv/bin/python -m bench.repair_bench [--size-mib 1024] [--seconds 5] [--lease-ttl 2]
                                           [--batch 10]
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
from bench.harness import REPO, machine, percentile
from metastore import paths
from metastore.embedded import EmbeddedEtcd, free_port
from metastore.store import MetadataStore, parse_metadata_store_url
from metastore.topology import read_cluster_view
from metastore.versioned_keys import VersionedKeys
from placement import PlacementConfig, Topology
from storage.autorecovery import AutoRecovery, AutoRecoveryConfig, UnderReplication
from storage.bookie.client import BookieClient
from storage.engine import build_ledger_client
from storage.ledger import BookiePool, LedgerClient, LedgerSpec, WriteHandle

BOOKIES = 6
ENTRY = 64 * 1024
ENTRIES_PER_LEDGER = 256  # 16 MiB ledgers
PRODUCER_ENTRY = os.urandom(1024)
PRODUCER_OUTSTANDING = 8
MiB = 1024 * 1024


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

        producer = Producer(handle)
        producer_task = asyncio.create_task(producer.run())
        await asyncio.sleep(seconds)
        base, base_count = producer.next_phase()
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
            if pending and first_mark is None:
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
        during, during_count = producer.next_phase()
        producer.stop()
        await producer_task
        producer_task = None
        await handle.close()
        worker = recovery.worker
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


def run(size_mib: int = 1024, seconds: float = 5.0, lease_ttl: int = 2,
        batch: int = 10) -> Outcome:
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


def report(o: Outcome) -> str:
    return "\n".join([
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.1f} at the end",
        "",
        f"rereplicationEntryBatchSize {o.batch}",
        "",
        "| written (stored x3) | ledgers | lost bookie's share | restore from kill "
        "| copy from first mark "
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
    ])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.repair_bench")
    parser.add_argument("--size-mib", type=int, default=1024,
                        help="MiB of entries the cluster holds before the loss (default 1024)")
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="the producer's baseline phase")
    parser.add_argument("--lease-ttl", type=int, default=2,
                        help="the bookies' registration lease: how soon a loss is seen")
    parser.add_argument("--batch", type=int, default=10,
                        help="rereplicationEntryBatchSize (upstream default 10)")
    args = parser.parse_args(argv)
    print(report(run(args.size_mib, args.seconds, args.lease_ttl, args.batch)))


if __name__ == "__main__":
    main()
