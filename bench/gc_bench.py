"""Adds while a bookie compacts, against adds on the same bookie just before (same run).

One bookie process (4 MiB entry logs, GC only when forced, compactionRateByEntries as given),
two ledgers of 1 KiB entries written interleaved, so every complete log is half one ledger;
then closed-loop 1 KiB adds (8 outstanding) to a third ledger for `--seconds`: first with GC
idle (the baseline), then right after the second ledger's metadata is deleted and a forced GC
starts compacting every log (usage ~50% < majorCompactionThreshold 0.8). Reports adds/s and
p50/p99 for both, their ratio, and what the GC reclaimed.

    .venv/bin/python -m bench.gc_bench [--seconds 5] [--rate 5000] [--entries 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import uvloop

from bench.harness import REPO, machine
from metastore import paths
from metastore.embedded import EmbeddedEtcd, free_port
from metastore.ledger_metadata import LedgerMetadata
from metastore.ledgers import LedgerMetadataStore
from metastore.store import MetadataStore, parse_metadata_store_url
from metastore.versioned_keys import VersionedKeys
from storage.bookie.errors import ConnectionLost
from storage.bookie.format import package_entry
from storage.bookie_client import BookieClient

MASTER_KEY = b"\x01" * 20
PAYLOAD = os.urandom(1024)
KEEP, DROP, LOAD = 1, 2, 3


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def fill(client: BookieClient, entries: int) -> None:
    for start in range(0, entries, 500):
        await asyncio.gather(*(
            client.add(ledger, i, MASTER_KEY, package_entry(ledger, i, i - 1, 0, PAYLOAD))
            for i in range(start, min(entries, start + 500)) for ledger in (KEEP, DROP)
        ))  # fmt: skip


async def load(client: BookieClient, first: int, seconds: float) -> tuple[float, float, float, int]:
    latencies: list[float] = []
    next_id = first
    end = time.perf_counter() + seconds

    async def one() -> None:
        nonlocal next_id
        while time.perf_counter() < end:
            entry_id, next_id = next_id, next_id + 1
            t0 = time.perf_counter()
            await client.add(LOAD, entry_id, MASTER_KEY,
                             package_entry(LOAD, entry_id, entry_id - 1, 0, PAYLOAD))
            latencies.append(time.perf_counter() - t0)

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(8)))
    elapsed = time.perf_counter() - started
    return (len(latencies) / elapsed, percentile(latencies, 0.5) * 1e3,
            percentile(latencies, 0.99) * 1e3, next_id)


def log_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in (data_dir / "ledgers" / "current").glob("*.log"))


async def measure(etcd: EmbeddedEtcd, data_dir: Path, port: int, seconds: float,
                  entries: int) -> str:
    store = MetadataStore(parse_metadata_store_url(etcd.url))
    keys = VersionedKeys.of(store)
    ledgers = LedgerMetadataStore(keys)
    bookie_id = f"127.0.0.1:{port}"
    for ledger in (KEEP, DROP, LOAD):
        await ledgers.create(LedgerMetadata(ledger, 1, 1, 1, {0: (bookie_id,)}))
    client = await BookieClient.connect(bookie_id)
    try:
        await fill(client, entries)
        written = 2 * entries * (len(PAYLOAD) + 44)
        while log_bytes(data_dir) < written:
            await asyncio.sleep(0.1)
        before = log_bytes(data_dir)
        idle = await load(client, 0, seconds)
        await ledgers.delete(DROP)
        await store.put(paths.BOOKIE_GC_REQUEST, b"{}")
        busy = await load(client, idle[3], seconds)
        after = log_bytes(data_dir)
    finally:
        await client.close()
        await keys.close()
        await store.close()
    return "\n".join([
        "| phase | adds/s | p50 ms | p99 ms |",
        "|---|---|---|---|",
        f"| GC idle (baseline) | {idle[0]:,.0f} | {idle[1]:.2f} | {idle[2]:.2f} |",
        f"| compacting | {busy[0]:,.0f} | {busy[1]:.2f} | {busy[2]:.2f} |",
        "",
        f"compacting / idle: adds/s {busy[0] / idle[0]:.0%}, p99 {busy[2] / idle[2]:.2f}x; "
        f"entry logs {before / 2**20:.1f} MiB before, {after / 2**20:.1f} MiB at the end of "
        f"the {seconds:g} s window",
    ])


def run(seconds: float = 5.0, rate: int = 5000, entries: int = 20_000) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        etcd = EmbeddedEtcd(work / "etcd")
        etcd.start()
        port = free_port()
        data_dir = work / "bookie"
        conf = {"logSizeLimit": str(4 * 2**20), "flushInterval": "200", "gcWaitTime": "3600000",
                "compactionRateByEntries": str(rate), "journalPreAllocSizeMB": "1"}
        args = [a for k, v in conf.items() for a in ("-c", f"{k}={v}")]
        process = subprocess.Popen(
            [sys.executable, "-m", "storage.bookie", "--bookie-id", f"127.0.0.1:{port}",
             "--data-dir", str(data_dir), "--metadata-store-url", etcd.url, *args],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            async def main() -> str:
                for _ in range(300):
                    try:
                        await (await BookieClient.connect(f"127.0.0.1:{port}")).close()
                        break
                    except ConnectionLost:
                        await asyncio.sleep(0.1)
                return await measure(etcd, data_dir, port, seconds, entries)

            table = uvloop.run(main())
        finally:
            process.terminate()
            process.wait()
            etcd.stop()
    return f"{machine()}\ncompactionRateByEntries={rate}, {entries} entries per ledger\n{table}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gc_bench")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--entries", type=int, default=20_000)
    args = parser.parse_args(argv)
    print(run(args.seconds, args.rate, args.entries))


if __name__ == "__main__":
    main()
