"""The ledger client on three bookie processes, and the REST producer on top of it.

1. A ledger with E=3/Qw=3/Qa=2 on three bookie processes: 1 KiB adds at 1 and 64 outstanding
   (closed loop: N coroutines, each adding its next entry once the previous one is
   acknowledged in order), adds/s and p50/p99 latency. Baseline in the same run: the same
   load sent with `BookieClient` straight to one of those bookies (a single durable copy,
   no quorum, no ordering).
2. REST produce: `POST /topics/persistent/...` with batches of 100 messages of 1 KiB on
   the real service (one client, one batch at a time), messages/s, against the ledger's own
   64-outstanding rate above.
CPU per ledger add (steadier than rates on a shared machine): this process (the ledger
client, `time.process_time`) and the three bookie processes together (/proc/<pid>/stat).
This process sets CPython's GC as the service's does after start-up (`--python-gc`).

    .venv/bin/python -m bench.ledger_bench [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvloop

from bench.bookie_bench import MASTER_KEY, wait_ready
from bench.harness import REPO, BenchServer, cpu_seconds, machine, percentile
from metastore.embedded import EmbeddedEtcd, free_port
from metastore.store import MetadataStore, parse_metadata_store_url
from metastore.topology import read_cluster_view
from placement import PlacementConfig, Topology
from storage.bookie.format import package_entry
from storage.bookie_client import BookieClient
from storage.engine import build_ledger_client
from storage.ledger import BookiePool, LedgerSpec
from storage.runtime import GC_DEFAULT, GC_MODES, set_gc

PAYLOAD = os.urandom(1024)
LEVELS = (1, 64)


@dataclass(frozen=True)
class Cpu:
    client_us: float  # CPU of this process (the ledger client) per acknowledged add
    bookies_us: float  # CPU of the three bookie processes together per acknowledged add


@dataclass(frozen=True)
class Result:
    rate: float
    p50_ms: float
    p99_ms: float


def result(latencies: list[float], elapsed: float, count: int | None = None) -> Result:
    return Result((len(latencies) if count is None else count) / elapsed,
                  percentile(latencies, 50) * 1e3, percentile(latencies, 99) * 1e3)


async def ledger_level(etcd_url: str, outstanding: int, seconds: float,
                       latencies: list[float] | None = None) -> Result:
    """The closed loop on one E=3/Qw=3/Qa=2 ledger; each add's latency (s) is also appended
    to `latencies` when given."""
    config = PlacementConfig()
    store = MetadataStore(parse_metadata_store_url(etcd_url))

    async def topology() -> Topology:
        return (await read_cluster_view(store, config)).topology

    client = build_ledger_client(store, BookiePool(BookieClient.connect), topology, config,
                                 random.Random(1))
    handle = await client.create(LedgerSpec(3, 3, 2, {"application": b"bench"}))
    await handle.add(PAYLOAD)  # dial the three bookies first
    if latencies is None:
        latencies = []
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            await handle.add(PAYLOAD)
            latencies.append(time.perf_counter() - t0)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(outstanding)))
    elapsed = time.perf_counter() - started
    await handle.close()
    await client.close()
    await store.close()
    return result(latencies, elapsed)


async def single_bookie_level(address: str, outstanding: int, seconds: float,
                              ledger_id: int) -> Result:
    client = await BookieClient.connect(address, timeout=30)
    latencies: list[float] = []
    stop = time.perf_counter() + seconds
    next_id = 0

    async def worker() -> None:
        nonlocal next_id
        while time.perf_counter() < stop:
            entry_id = next_id
            next_id += 1
            entry = package_entry(ledger_id, entry_id, entry_id - 1, (entry_id + 1) * 1024,
                                  PAYLOAD)
            t0 = time.perf_counter()
            await client.add(ledger_id, entry_id, MASTER_KEY, entry)
            latencies.append(time.perf_counter() - t0)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(outstanding)))
    elapsed = time.perf_counter() - started
    await client.close()
    return result(latencies, elapsed)


def rest_produce(server: BenchServer, seconds: float) -> Result:
    text = PAYLOAD.hex()[:1024]
    body = {"messages": [{"payload": text} for _ in range(100)]}
    with httpx.Client(base_url=server.url, timeout=60) as http:
        http.put("/admin/v2/clusters/bench", json={"serviceUrl": "http://x"})
        http.put("/admin/v2/tenants/bench", json={"allowedClusters": ["bench"]})
        http.put("/admin/v2/namespaces/bench/ns")
        http.post("/topics/persistent/bench/ns/warm", json=body).raise_for_status()
        latencies: list[float] = []
        stop = time.perf_counter() + seconds
        started = time.perf_counter()
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            response = http.post("/topics/persistent/bench/ns/topic", json=body)
            response.raise_for_status()
            latencies.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - started
    return result(latencies, elapsed, count=100 * len(latencies))


def start_bookies(workdir: Path, etcd_url: str, processes: list[subprocess.Popen[bytes]],
                  count: int = 3) -> list[str]:
    """`count` bookie processes with the default settings, appended to `processes` as they
    start (the caller stops them, also when one fails to start); their addresses, ready."""
    addresses = []
    for i in range(count):
        address = f"127.0.0.1:{free_port()}"
        command = [
            sys.executable, "-m", "storage.bookie", "--bookie-id", address,
            "--data-dir", str(workdir / f"bookie{i}"), "--metadata-store-url", etcd_url,
        ]  # fmt: skip
        with open(workdir / f"bookie{i}.log", "ab") as log:
            processes.append(subprocess.Popen(command, cwd=REPO, stdout=log, stderr=log))
        addresses.append(address)
    for address in addresses:
        asyncio.run(wait_ready(address))
    return addresses


def run(seconds: float = 3.0) -> str:
    with tempfile.TemporaryDirectory(prefix="ledger-bench-", dir=REPO) as tmp:
        workdir = Path(tmp)
        etcd = EmbeddedEtcd(workdir / "etcd")
        etcd.start()
        processes: list[subprocess.Popen[bytes]] = []
        try:
            addresses = start_bookies(workdir, etcd.url, processes)
            rows = []
            for index, level in enumerate(LEVELS):
                single = uvloop.run(single_bookie_level(addresses[0], level, seconds,
                                                        10_000 + index))
                bookies0 = sum(cpu_seconds(p.pid) for p in processes)
                client0 = time.process_time()
                ledger = uvloop.run(ledger_level(etcd.url, level, seconds))
                adds = ledger.rate * seconds
                cpu = Cpu((time.process_time() - client0) / adds * 1e6,
                          (sum(cpu_seconds(p.pid) for p in processes) - bookies0) / adds * 1e6)
                rows.append((level, ledger, single, cpu))
            with BenchServer(etcd, workdir) as server:
                rest = rest_produce(server, seconds)
        finally:
            for process in processes:
                process.terminate()
                process.wait(timeout=30)
            etcd.stop()
    lines = [
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.1f} at the end (rates move "
        "with the load on the machine; compare the ratios)",
        "",
        "| outstanding | ledger E=3/Qw=3/Qa=2 adds/s | p50 / p99 ms | one bookie direct adds/s "
        "| p50 / p99 ms | ledger / one bookie | client CPU µs/add | 3 bookies' CPU µs/add |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for level, ledger, single, cpu in rows:
        lines.append(
            f"| {level} | {ledger.rate:,.0f} | {ledger.p50_ms:.2f} / {ledger.p99_ms:.2f} "
            f"| {single.rate:,.0f} | {single.p50_ms:.2f} / {single.p99_ms:.2f} "
            f"| {ledger.rate / single.rate:.0%} | {cpu.client_us:.0f} | {cpu.bookies_us:.0f} |"
        )
    top = rows[-1][1]
    lines += [
        "",
        "| REST produce, batches of 100 x 1 KiB | messages/s | p50 / p99 ms per batch "
        "| / ledger adds at 64 outstanding |",
        "|---|---|---|---|",
        f"| one client, one batch at a time | {rest.rate:,.0f} | {rest.p50_ms:.1f} / "
        f"{rest.p99_ms:.1f} | {rest.rate / top.rate:.0%} |",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ledger_bench")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--python-gc", choices=GC_MODES, default=GC_DEFAULT,
                        help="this process's (the ledger client's) CPython GC mode; the "
                             f"service sets {GC_DEFAULT} after its start-up")
    args = parser.parse_args(argv)
    set_gc(args.python_gc)  # as the service process does once it has started
    print(run(args.seconds))


if __name__ == "__main__":
    main()
