"""One bookie process, 1 KiB adds at 1, 8, 64 and 256 outstanding, against a raw grouped
pwrite+fdatasync loop measured in the same run on the same file system.

Closed loop: N client coroutines on one BookieClient connection, each adding its next entry as
soon as the previous one is acknowledged (an ack means the journal group was fdatasync'ed).
The baseline writes N 1 KiB records with one pwrite and one fdatasync, repeatedly, on a
posix_fallocate'd file ("raw grouped", the row targets are judged on) and over a file already
written with zeros and synced ("raw on zeros", the disk's best: each fdatasync flushes data
only, where over fallocate'd, unwritten extents it also commits their conversion in the file
system's journal); the bookie preallocates its journal with written zeros, so both ratios are
shown. Each baseline is the faster of two runs back to back (`raw_grouped`).

At 64 outstanding the same closed loop is also run from the lean load generator of
`bench.lean_load` (pre-built frames on a plain socket, its loop compiled and run without the
GIL: under 1 µs of CPU per add, against 13-20 µs for the `BookieClient` loop): on two cores the
client's CPU competes with the bookie's, so the targets (>= 60% of the raw grouped rate, p99 <=
2 ms at 64 outstanding) are judged on that row, which measures the bookie; the client row stays
to show what a Python caller of the bookie gets. Both rows count an add only when the bookie
acked it, i.e. after the fdatasync of its journal group. A third row at 64 runs the lean
generator against the bookie floor (`bench.bookie_floor`): one compiled thread that checks and
journals each turn's frames, one pwrite and one fdatasync over a file written with zeros, then
the acks, and nothing else a bookie does (no write cache, entry log, index or hand-off between
threads): a bound on what any bookie reaches with this client, network path and disk. A fourth
row runs the floor with each turn's write and sync on a second thread, handed over and reported
back as the bookie's journal writer does (a condition variable, an eventfd): the cost of those
two hand-offs per group alone.

Each row also shows the bookie's own records per synced journal group (from its statistics
endpoint; the floor's from its own count): the closed loop at N outstanding puts its N adds in
one group, so the raw loop's N records per sync is the same grouping.

Memory: the bookie's RSS is sampled every 50 ms through those runs, and then for a fresh
bookie per write-cache size (`dbStorage_writeCacheMaxSizeMb`) under 64 outstanding adds for
`--rss-seconds`, long enough to fill and checkpoint the cache many times: the growth over the
idle RSS against the cache size, split into anonymous memory (the process's own: the write
cache and the rest) and file-backed pages (mostly the LMDB index's mapped pages, page cache
that grows with the number of entries indexed and that the kernel can reclaim).

    .venv/bin/python -m bench.bookie_bench [--seconds 3] [--rss-seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvloop

from bench.bookie_floor import floor_bookie, floor_frames
from bench.harness import REPO, cpu_seconds, machine
from bench.lean_load import build_frames, lean_run
from metastore.embedded import EmbeddedEtcd, free_port
from storage.bookie.format import package_entry
from storage.bookie_client import BookieClient

LEVELS = (1, 8, 64, 256)
LEAN_LEVEL = 64  # also measured with the lean load generator (bench.lean_load)
LEAN_MAX_RATE = 200_000  # adds/s the lean generator's pre-built frames last `seconds` at
FLOOR_MAX_RATE = 600_000  # the same for the floor, whose frames repeat (`floor_frames`)
RSS_CACHES_MB = (16, 64)
PAYLOAD = os.urandom(1024)
MASTER_KEY = b"\x01" * 20


@dataclass(frozen=True)
class Result:
    outstanding: int
    rate: float
    p50_ms: float
    p99_ms: float


@dataclass(frozen=True)
class Row:
    label: str
    bookie: Result
    raw: Result
    raw_zeroed: Result  # the same loop over a file already written with zeros
    cpu_us: float  # the bookie's CPU per add
    client_cpu_us: float
    group: float  # records per synced journal group
    sync_ms: float  # the bookie's mean journal fdatasync over the row


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


RAW_SIZE = 512 * 1024 * 1024
ZEROED_SIZE = 256 * 1024 * 1024


def zeroed_file(directory: Path) -> Path:
    """A file written with zeros and synced (its blocks written, its pages cached): the raw
    loop over it is the disk's best, a data flush per group and no extent conversion."""
    path = directory / "raw-zeroed.bin"
    zeros = bytes(1024 * 1024)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for offset in range(0, ZEROED_SIZE, len(zeros)):
            os.pwrite(fd, zeros, offset)
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def raw_grouped(directory: Path, group: int, seconds: float, zeroed: Path | None = None,
                attempts: int = 2) -> Result:
    """The raw loop: `group` records per pwrite + fdatasync, on a fresh posix_fallocate'd file
    (unwritten extents, as a journal preallocates them with fallocate), or over `zeroed`; the
    faster of `attempts` runs. On this disk the first run after a bookie's traffic measured
    half the rate of the next (159-163k against 296-333k records/s, with nothing left dirty
    to write back), so one run alone says more about what ran before it than about the disk."""
    return max((_raw_run(directory, group, seconds, zeroed) for _ in range(attempts)),
               key=lambda result: result.rate)


def _raw_run(directory: Path, group: int, seconds: float, zeroed: Path | None) -> Result:
    if zeroed is None:
        path = directory / f"raw-{group}.bin"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        size = RAW_SIZE
        os.posix_fallocate(fd, 0, size)
    else:
        path, size = zeroed, ZEROED_SIZE
        fd = os.open(path, os.O_RDWR)
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
    if zeroed is None:
        path.unlink()
    return Result(
        group,
        records / elapsed,
        percentile(latencies, 0.5) * 1e3,
        percentile(latencies, 0.99) * 1e3,
    )


async def bookie_level(address: str, outstanding: int, seconds: float, base: int,
                       latencies: list[float] | None = None) -> Result:
    """The closed loop on one BookieClient; each add's latency (s) is also appended to
    `latencies` when given."""
    client = await BookieClient.connect(address, timeout=30)
    if latencies is None:
        latencies = []
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


def lean_result(outstanding: int, seconds: float, label: str, adds: int, elapsed: float,
                latencies: list[float]) -> tuple[str, Result]:
    """A `lean_run`'s figures as a Result, and `label`, saying when the slots ran out of
    frames before `seconds`."""
    if elapsed < seconds:
        label += f" (frames ran out at {elapsed:.1f} s)"
    return label, Result(outstanding, adds / elapsed, percentile(latencies, 0.5),
                         percentile(latencies, 0.99))


def lean_row(address: str, pid: int, stats_port: int, outstanding: int, seconds: float,
             raw: Result, raw_zeroed: Result) -> Row:
    """The same closed loop from the lean generator (pre-built frames, plain socket). Should
    the bookie outrun LEAN_MAX_RATE, the slots run out of frames early and the row says when."""
    per_slot = math.ceil(seconds * LEAN_MAX_RATE / outstanding)
    frames = build_frames(outstanding, per_slot, 900_000, PAYLOAD, MASTER_KEY)
    groups = GroupCounter(stats_port)
    cpu0, client0 = cpu_seconds(pid), time.process_time()
    adds, elapsed, latencies = lean_run(address, frames, seconds, 900_000)
    cpu = (cpu_seconds(pid) - cpu0) / adds * 1e6
    client_cpu = (time.process_time() - client0) / adds * 1e6
    label, result = lean_result(outstanding, seconds, f"{outstanding}, lean generator", adds,
                                elapsed, latencies)
    return Row(label, result, raw, raw_zeroed, cpu, client_cpu,
               groups.mean(), groups.sync_ms())


def floor_row(journal: Path, outstanding: int, seconds: float, raw: Result,
              raw_zeroed: Result, handoff: bool = False) -> Row:
    """The same lean closed loop against the bookie floor (`bench.bookie_floor`: per turn the
    frames received are checked and journaled over `journal`, one pwrite and one fdatasync,
    then the acks; nothing else, one thread): what the machine allows any bookie at most.
    With `handoff`, each turn's write and sync on a second thread, as the bookie's journal
    writer: what its two hand-offs per group cost."""
    per_slot = math.ceil(seconds * FLOOR_MAX_RATE / outstanding)
    frames = floor_frames(outstanding, per_slot, 900_000, PAYLOAD, MASTER_KEY)
    process0, client0 = time.process_time(), time.thread_time()  # the client: this thread
    with floor_bookie(journal, handoff) as served:
        adds, elapsed, latencies = lean_run(served.address, frames, seconds, 900_000)
    client_cpu = time.thread_time() - client0
    floor_cpu = time.process_time() - process0 - client_cpu  # its thread(s)
    kind = "floor with the hand-offs" if handoff else "floor"
    label, result = lean_result(outstanding, seconds, f"{outstanding}, {kind} (lean generator)",
                                adds, elapsed, latencies)
    return Row(label, result, raw, raw_zeroed, floor_cpu / adds * 1e6, client_cpu / adds * 1e6,
               served.per_group, served.sync_ms)


_BATCH = "bookie_journal_JOURNAL_FORCE_WRITE_BATCH_ENTRIES"
_SYNC = "bookie_journal_JOURNAL_SYNC"


def journal_groups(stats_port: int) -> tuple[float, float, float]:
    """Synced journal groups so far, the records they held and their fdatasyncs' total ms,
    from the bookie's Prometheus endpoint (the records-per-group and sync summaries)."""
    text = httpx.get(f"http://127.0.0.1:{stats_port}/metrics", timeout=10).text
    found = {(_BATCH, "count"): 0.0, (_BATCH, "sum"): 0.0, (_SYNC, "sum"): 0.0}
    for line in text.splitlines():
        for name, part in found:
            if line.startswith(f'{name}_{part}{{success="true"}} '):
                found[name, part] = float(line.rsplit(" ", 1)[1])
    return found[_BATCH, "count"], found[_BATCH, "sum"], found[_SYNC, "sum"]


class GroupCounter:
    """Records per synced journal group, and its mean fdatasync, over a span of a run."""

    def __init__(self, stats_port: int) -> None:
        self.stats_port = stats_port
        self.start = journal_groups(stats_port)
        self.end: tuple[float, float, float] | None = None

    def _delta(self) -> tuple[float, float, float]:
        if self.end is None:
            self.end = journal_groups(self.stats_port)
        groups, records, sync = (e - s for e, s in zip(self.end, self.start, strict=True))
        return groups, records, sync

    def mean(self) -> float:
        groups, records, _ = self._delta()
        return records / groups if groups else 0.0

    def sync_ms(self) -> float:
        groups, _, sync = self._delta()
        return sync / groups if groups else 0.0


def rss_parts(pid: int) -> dict[str, float]:
    """VmRSS and its anonymous and file-backed parts (MiB) from /proc/<pid>/status. The
    file-backed part includes the LMDB index's mapped pages (page cache, reclaimable)."""
    found = {"VmRSS": 0.0, "RssAnon": 0.0, "RssFile": 0.0}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in found:
            found[key] = int(value.split()[0]) / 1024
    return found


def rss_mib(pid: int) -> float:
    return rss_parts(pid)["VmRSS"]


class RssSampler:
    """The peak RSS of a process (and of its anonymous and file-backed parts, each on its
    own), sampled every `every` seconds in a thread."""

    def __init__(self, pid: int, every: float = 0.05) -> None:
        self.pid = pid
        self.every = every
        self.idle = rss_parts(pid)
        self.peaks = dict(self.idle)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def peak(self) -> float:
        return self.peaks["VmRSS"]

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            with contextlib.suppress(OSError):
                for key, value in rss_parts(self.pid).items():
                    self.peaks[key] = max(self.peaks[key], value)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def start_bookie(workdir: Path, name: str, etcd_url: str,
                 conf: dict[str, str] | None = None,
                 args: Sequence[str] = ()) -> tuple[str, subprocess.Popen[bytes]]:
    """A bookie process with BookKeeper settings `conf` (`-c`) and extra flags `args`."""
    address = f"127.0.0.1:{free_port()}"
    command = [
        sys.executable, "-m", "storage.bookie", "--bookie-id", address,
        "--data-dir", str(workdir / name), "--metadata-store-url", etcd_url,
        *(arg for key, value in (conf or {}).items() for arg in ("-c", f"{key}={value}")),
        *args,
    ]  # fmt: skip
    with open(workdir / f"{name}.log", "ab") as log:
        process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=log)
    asyncio.run(wait_ready(address))
    return address, process


def stop_bookie(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(timeout=60)


@dataclass(frozen=True)
class Memory:
    cache_mb: int
    idle: dict[str, float]  # rss_parts at idle
    peaks: dict[str, float]  # the peak of each under load
    adds: float  # 1 KiB adds during the sustained load

    def grown(self, key: str) -> float:
        return self.peaks[key] - self.idle[key]


def sustained_rss(workdir: Path, etcd_url: str, cache_mb: int, seconds: float) -> Memory:
    """One bookie with a `cache_mb` write cache under 64 outstanding adds for `seconds` (the
    cache fills and is checkpointed many times over): idle and peak RSS."""
    address, process = start_bookie(workdir, f"rss-{cache_mb}", etcd_url,
                                    {"dbStorage_writeCacheMaxSizeMb": str(cache_mb)})
    try:
        with RssSampler(process.pid) as sampler:
            result = uvloop.run(bookie_level(address, 64, seconds, 500_000))
        return Memory(cache_mb, sampler.idle, sampler.peaks, result.rate * seconds)
    finally:
        stop_bookie(process)


def run(seconds: float = 3.0, rss_seconds: float = 10.0) -> str:
    with tempfile.TemporaryDirectory(prefix="bookie-bench-", dir=REPO) as tmp:
        workdir = Path(tmp)
        etcd = EmbeddedEtcd(workdir / "etcd")
        etcd.start()
        try:
            stats_port = free_port()
            address, process = start_bookie(workdir, "bookie", etcd.url,
                                            {"prometheusStatsHttpPort": str(stats_port)})
            try:
                idle = rss_mib(process.pid)
                rows: list[Row] = []
                zeroed = zeroed_file(workdir)
                with RssSampler(process.pid) as sampler:
                    for index, level in enumerate(LEVELS):
                        raw = raw_grouped(workdir, level, seconds)
                        raw_zeroed = raw_grouped(workdir, level, seconds, zeroed)
                        groups = GroupCounter(stats_port)
                        cpu0, client0 = cpu_seconds(process.pid), time.process_time()
                        result = uvloop.run(
                            bookie_level(address, level, seconds, 1000 * (index + 1))
                        )
                        adds = result.rate * seconds
                        cpu = (cpu_seconds(process.pid) - cpu0) / adds * 1e6
                        client_cpu = (time.process_time() - client0) / adds * 1e6
                        rows.append(Row(str(level), result, raw, raw_zeroed, cpu, client_cpu,
                                        groups.mean(), groups.sync_ms()))
                        if level == LEAN_LEVEL:
                            lean = lean_row(address, process.pid, stats_port, level, seconds,
                                            raw, raw_zeroed)
                            floor, handed = (floor_row(zeroed, level, seconds, raw, raw_zeroed,
                                                       handoff) for handoff in (False, True))
                            rows += [lean, floor, handed]
                peak = sampler.peak
            finally:
                stop_bookie(process)
            memory = [sustained_rss(workdir, etcd.url, mb, rss_seconds) for mb in RSS_CACHES_MB]
        finally:
            etcd.stop()
    lines = [
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.1f} at the end; data under "
        f"{REPO} (rates move with the load on the machine, CPU µs per add much less so)",
        "",
        "| outstanding | bookie adds/s | p50 / p99 ms | raw grouped records/s | raw p50 / p99 ms "
        "| bookie / raw | raw on zeros records/s | raw on zeros p50 / p99 ms "
        "| bookie / raw on zeros | bookie CPU µs/add | client CPU µs/add | bookie records per "
        "journal group | round ms (outstanding / adds/s) | bookie journal fdatasync mean ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        result, raw, best = row.bookie, row.raw, row.raw_zeroed
        lines.append(
            f"| {row.label} | {result.rate:,.0f} | {result.p50_ms:.2f} / {result.p99_ms:.2f} "
            f"| {raw.rate:,.0f} | {raw.p50_ms:.2f} / {raw.p99_ms:.2f} "
            f"| {result.rate / raw.rate:.0%} | {best.rate:,.0f} "
            f"| {best.p50_ms:.2f} / {best.p99_ms:.2f} | {result.rate / best.rate:.0%} "
            f"| {row.cpu_us:.1f} | {row.client_cpu_us:.1f} "
            f"| {row.group:.1f} | {result.outstanding / result.rate * 1e3:.2f} "
            f"| {row.sync_ms:.2f} |"
        )
    lines += [
        "",
        f"The bookie from the lean generator at {LEAN_LEVEL} outstanding: "
        f"{lean.bookie.rate / floor.bookie.rate:.0%} of the floor's rate and "
        f"{lean.bookie.rate / handed.bookie.rate:.0%} of the floor's with the hand-offs (the "
        f"floor: {floor.bookie.rate / floor.raw.rate:.0%} of the raw grouped rate, "
        f"{handed.bookie.rate / floor.raw.rate:.0%} with the hand-offs).",
    ]
    lines += [
        "",
        f"Bookie RSS (default 64 MiB write cache): {idle:.0f} MiB idle after start, "
        f"{peak:.0f} MiB peak over the runs above (sampled every 50 ms).",
        "",
        f"Sustained load (64 outstanding, {rss_seconds:.0f} s per row, RSS sampled every 50 ms; "
        "anonymous memory is the process's own, file-backed RSS is mostly the LMDB index's "
        "mapped pages, page cache the kernel can reclaim, growing with the entries indexed):",
        "",
        "| dbStorage_writeCacheMaxSizeMb | adds (MiB written) | idle RSS MiB (anon + file) "
        "| peak RSS MiB | peak - idle MiB | anon growth MiB | anon growth / cache "
        "| file growth MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in memory:
        anon = m.grown("RssAnon")
        lines.append(
            f"| {m.cache_mb} | {m.adds:,.0f} ({m.adds / 1024:,.0f}) | {m.idle['VmRSS']:.0f} "
            f"({m.idle['RssAnon']:.0f} + {m.idle['RssFile']:.0f}) | {m.peaks['VmRSS']:.0f} "
            f"| {m.grown('VmRSS'):.0f} | {anon:.0f} | {anon / m.cache_mb:.2f} "
            f"| {m.grown('RssFile'):.0f} |"
        )
    return "\n".join(lines)


async def wait_ready(address: str) -> None:
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
    parser.add_argument("--rss-seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    print(run(args.seconds, args.rss_seconds))


if __name__ == "__main__":
    main()
