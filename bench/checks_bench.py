"""The auditor's replicas check: one GET_LIST_OF_ENTRIES_OF_LEDGER per bookie per ledger (as
upstream) against reading every copy of every entry (what the check did before), in the same
run on the same data.

Three `python -m storage.bookie` processes on one etcd; `--ledgers` closed ledgers of
`--entries` 100-byte entries each, E=3/Qw=3/Qa=2 (every bookie holds every entry). Then, each
`--rounds` times, alternating:

1. the replicas check (`PeriodicChecks.check_replicas`, no read pacing);
2. the baseline: every entry read from each bookie of its write set, one ledger per task and
   one read at a time per ledger, as the former check did.

Reported per copy checked: the checking process's CPU (`time.process_time`), the bookies' CPU
(/proc/<pid>/stat utime+stime, summed over the three), and the wall time; CPU is what to judge
on a shared machine. Both must agree that the ledgers are fully replicated.

    .venv/bin/python -m bench.checks_bench [--ledgers 4] [--entries 5000] [--rounds 3]

About a minute with the defaults on 2 shared cores (writing the entries is most of it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.bookie_bench import start_bookie, stop_bookie
from bench.harness import REPO, cpu_seconds, machine
from metastore.embedded import EmbeddedEtcd
from metastore.store import MetadataStore, parse_metadata_store_url
from metastore.topology import read_cluster_view
from metastore.versioned_keys import VersionedKeys
from placement import PlacementConfig, Topology, write_set
from storage.autorecovery import AutoRecoveryConfig, UnderReplication
from storage.autorecovery.checker import PeriodicChecks
from storage.bookie_client import BookieClient
from storage.engine import build_ledger_client
from storage.ledger import BookiePool, LedgerClient, LedgerSpec
from storage.ledger.metadata import LedgerMetadata

BOOKIES = 3
PAYLOAD = os.urandom(100)


@dataclass(frozen=True)
class Sample:
    copies: int
    wall: float
    own_cpu: float
    bookie_cpu: float

    def per_copy_us(self) -> tuple[float, float, float]:
        n = max(1, self.copies)
        return self.own_cpu / n * 1e6, self.bookie_cpu / n * 1e6, self.wall / n * 1e6


async def fill(client: LedgerClient, ledgers: int, entries: int) -> list[int]:
    ids: list[int] = []

    async def one() -> None:
        handle = await client.create(LedgerSpec(3, 3, 2, {"application": b"checks-bench"}))
        ids.append(handle.ledger_id)
        for start in range(0, entries, 32):
            await asyncio.gather(*(handle.add_nowait(PAYLOAD)
                                   for _ in range(min(32, entries - start))))
        await handle.close()

    await asyncio.gather(*(one() for _ in range(ledgers)))
    return ids


async def read_every_copy(bookies: BookiePool, mds: list[LedgerMetadata]) -> int:
    """The former check: each entry from each bookie of its write set; copies missing."""
    missing = 0

    async def one(md: LedgerMetadata) -> None:
        nonlocal missing
        for entry_id in range(md.last_entry_id + 1):
            ensemble = md.ensemble_for(entry_id)
            for index in write_set(entry_id, md.ensemble_size, md.write_quorum_size):
                connection = await bookies.get(ensemble[index])
                try:
                    await connection.read(md.ledger_id, entry_id)
                except Exception:
                    missing += 1

    await asyncio.gather(*(one(md) for md in mds))
    return missing


def measured(pids: list[int], copies: int, fn):  # type: ignore[no-untyped-def]
    async def run():  # type: ignore[no-untyped-def]
        bookie_before = sum(cpu_seconds(p) for p in pids)
        own_before, wall_before = time.process_time(), time.perf_counter()
        result = await fn()
        wall = time.perf_counter() - wall_before
        own = time.process_time() - own_before
        return result, Sample(copies, wall, own, sum(cpu_seconds(p) for p in pids) - bookie_before)
    return run()


async def measure(etcd_url: str, pids: list[int], ledgers: int, entries: int,
                  rounds: int) -> tuple[list[Sample], list[Sample]]:
    config = PlacementConfig()
    store = MetadataStore(parse_metadata_store_url(etcd_url))

    async def topology() -> Topology:
        return (await read_cluster_view(store, config)).topology

    client = build_ledger_client(store, BookiePool(BookieClient.connect), topology, config,
                                 random.Random(3))
    keys = VersionedKeys(parse_metadata_store_url(etcd_url))
    try:
        started = time.perf_counter()
        ids = await fill(client, ledgers, entries)
        print(f"# wrote {ledgers} x {entries} entries in {time.perf_counter() - started:.1f} s",
              flush=True)
        mds = [await client.read_metadata(lid) for lid in ids]
        copies = sum((md.last_entry_id + 1) * md.write_quorum_size for md in mds)

        async def no_mark(ledger_id: int, missing: object) -> None:
            raise AssertionError("the replicas check marks nothing")

        checks = PeriodicChecks(keys, UnderReplication(keys), client.bookies,
                                AutoRecoveryConfig(auditorCheckReadsPerSecond=0), no_mark)
        listed: list[Sample] = []
        reads: list[Sample] = []
        for _ in range(rounds):
            report, sample = await measured(pids, copies, checks.check_replicas)
            assert not report.ledgers and not report.unavailable, report
            listed.append(sample)
            missing, sample = await measured(
                pids, copies, lambda: read_every_copy(client.bookies, mds))
            assert missing == 0
            reads.append(sample)
        return listed, reads
    finally:
        await client.close()
        await keys.close()
        await store.close()


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def report(listed: list[Sample], reads: list[Sample], ledgers: int, entries: int) -> str:
    def row(name: str, samples: list[Sample]) -> str:
        own, bookie, wall = (median([s.per_copy_us()[k] for s in samples]) for k in range(3))
        return f"| {name} | {own:.2f} | {bookie:.2f} | {wall:.2f} |"

    own_ratio = median([r.own_cpu for r in reads]) / median([s.own_cpu for s in listed])
    bookie_ratio = median([r.bookie_cpu for r in reads]) / median([s.bookie_cpu for s in listed])
    load = os.getloadavg()
    return "\n".join([
        f"{machine()}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        f"{ledgers} closed ledgers x {entries} entries, E=3/Qw=3/Qa=2, "
        f"{len(listed)} rounds each (medians), per copy checked:",
        "",
        "| method | checker CPU µs | bookies' CPU µs | wall µs |",
        "|---|---|---|---|",
        row("list of entries per bookie per ledger (replicas check)", listed),
        row("read every copy (former check, baseline)", reads),
        "",
        f"baseline / list: checker CPU {own_ratio:.0f}x, bookies' CPU {bookie_ratio:.0f}x",
    ])


def run(ledgers: int = 4, entries: int = 5000, rounds: int = 3) -> str:
    with tempfile.TemporaryDirectory(prefix="checks-bench-", dir=REPO) as tmp:
        workdir = Path(tmp)
        etcd = EmbeddedEtcd(workdir / "etcd")
        etcd.start()
        processes: list[subprocess.Popen[bytes]] = []
        try:
            for i in range(BOOKIES):
                _, process = start_bookie(workdir, f"bookie{i}", etcd.url)
                processes.append(process)
            listed, reads = asyncio.run(measure(etcd.url, [p.pid for p in processes], ledgers,
                                                entries, rounds))
        finally:
            for process in processes:
                with contextlib.suppress(Exception):
                    stop_bookie(process)
            etcd.stop()
    return report(listed, reads, ledgers, entries)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ledgers", type=int, default=4)
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    print(run(args.ledgers, args.entries, args.rounds))


if __name__ == "__main__":
    main()
