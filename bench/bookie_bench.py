"""One bookie process, 1 KiB adds at 1, 8, 64 and 256 outstanding, against a raw grouped
pwrite+fdatasync loop measured in the same run on the same file system.

Closed loop: N client coroutines on one BookieClient connection, each adding its next entry as
soon as the previous one is acknowledged (an ack means the journal group was fdatasync'ed).
The baseline writes N 1 KiB records with one pwrite and one fdatasync, repeatedly, on a
preallocated file: the rate a journal grouping N records per sync could at best reach.

    .venv/bin/python -m bench.bookie_bench [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import uvloop

from bench.harness import REPO, machine
from metastore.embedded import EmbeddedEtcd, free_port
from storage.bookie.client import BookieClient
from storage.bookie.format import package_entry

LEVELS = (1, 8, 64, 256)
PAYLOAD = os.urandom(1024)
MASTER_KEY = b"\x01" * 20


@dataclass(frozen=True)
class Result:
    outstanding: int
    rate: float
    p50_ms: float
    p99_ms: float


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def raw_grouped(directory: Path, group: int, seconds: float) -> Result:
    path = directory / f"raw-{group}.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    size = 512 * 1024 * 1024
    os.posix_fallocate(fd, 0, size)
    record = (len(PAYLOAD) + 44).to_bytes(4, "big") + b"\0" * 4 + PAYLOAD + b"\0" * 44
    data = record * group
    latencies: list[float] = []
    offset = 0
    records = 0
    end = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        if offset + len(data) > size:
            offset = 0
        os.pwrite(fd, data, offset)
        os.fdatasync(fd)
        offset += len(data)
        records += group
        latencies.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - started
    os.close(fd)
    path.unlink()
    return Result(
        group,
        records / elapsed,
        percentile(latencies, 0.5) * 1e3,
        percentile(latencies, 0.99) * 1e3,
    )


async def bookie_level(address: str, outstanding: int, seconds: float, base: int) -> Result:
    client = await BookieClient.connect(address, timeout=30)
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def worker(ledger_id: int) -> None:
        entry_id = 0
        length = 0
        while time.perf_counter() < stop:
            length += len(PAYLOAD)
            entry = package_entry(ledger_id, entry_id, entry_id - 1, length, PAYLOAD)
            t0 = time.perf_counter()
            await client.add(ledger_id, entry_id, MASTER_KEY, entry)
            latencies.append(time.perf_counter() - t0)
            entry_id += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(base + i) for i in range(outstanding)))
    elapsed = time.perf_counter() - started
    await client.close()
    return Result(
        outstanding,
        len(latencies) / elapsed,
        percentile(latencies, 0.5) * 1e3,
        percentile(latencies, 0.99) * 1e3,
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run(seconds: float = 3.0) -> str:
    with tempfile.TemporaryDirectory(prefix="bookie-bench-", dir=REPO) as tmp:
        workdir = Path(tmp)
        etcd = EmbeddedEtcd(workdir / "etcd")
        etcd.start()
        port = free_port()
        address = f"127.0.0.1:{port}"
        command = [
            sys.executable, "-m", "storage.bookie", "--bookie-id", address,
            "--data-dir", str(workdir / "bookie"), "--metadata-store-url", etcd.url,
        ]  # fmt: skip
        with open(workdir / "bookie.log", "ab") as log:
            process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=log)
        try:
            asyncio.run(_wait_ready(address))
            idle = rss_mib(process.pid)
            rows = []
            peak = idle
            for index, level in enumerate(LEVELS):
                raw = raw_grouped(workdir, level, seconds)
                cpu0, client0 = cpu_seconds(process.pid), time.process_time()
                result = uvloop.run(bookie_level(address, level, seconds, 1000 * (index + 1)))
                adds = result.rate * seconds
                cpu = (cpu_seconds(process.pid) - cpu0) / adds * 1e6
                client_cpu = (time.process_time() - client0) / adds * 1e6
                peak = max(peak, rss_mib(process.pid))
                rows.append((level, result, raw, cpu, client_cpu))
        finally:
            process.terminate()
            process.wait(timeout=30)
            etcd.stop()
    lines = [
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.1f} at the end; data under "
        f"{REPO} (a shared machine: rates are noisy, CPU µs per add much less so)",
        "",
        "| outstanding | bookie adds/s | p50 / p99 ms | raw grouped records/s | raw p50 / p99 ms "
        "| bookie / raw | bookie CPU µs/add | client CPU µs/add |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for level, result, raw, cpu, client_cpu in rows:
        lines.append(
            f"| {level} | {result.rate:,.0f} | {result.p50_ms:.2f} / {result.p99_ms:.2f} "
            f"| {raw.rate:,.0f} | {raw.p50_ms:.2f} / {raw.p99_ms:.2f} "
            f"| {result.rate / raw.rate:.0%} | {cpu:.0f} | {client_cpu:.0f} |"
        )
    lines += [
        "",
        f"Bookie RSS: {idle:.0f} MiB idle after start (fixed overhead), "
        f"{peak:.0f} MiB peak under load (write cache fills up to dbStorage_writeCacheMaxSizeMb).",
    ]
    return "\n".join(lines)


async def _wait_ready(address: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            client = await BookieClient.connect(address, timeout=1)
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
        else:
            await client.close()
            return


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bookie_bench")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    print(run(args.seconds))


if __name__ == "__main__":
    main()
