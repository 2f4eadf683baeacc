"""The peer figure: one upstream bookie (BookKeeper 4.17.2's own server, default settings, from
the jars of tests/interop) and one of ours, under the same client and load, beside the raw
grouped pwrite+fdatasync loop, all in the same run on the same file system.

Closed loop as `bench.bookie_bench`: N coroutines on one `BookieClient` connection (V2), 1 KiB
adds, each sent as soon as the previous one is acknowledged, at 1, 8, 64 and 256 outstanding;
the raw loop writes N records per pwrite+fdatasync. Both bookies acknowledge an add after the
fsync of its journal group (upstream: `journalSyncData=true`, its default; and its default
`journalMaxGroupWaitMSec=2`, the wait for more adds before a group is written). Each bookie
first takes a 64-outstanding run that is not reported, so the JVM's JIT has compiled the path.

Then a ledger E=3/Qw=3/Qa=2 at 64 outstanding (`bench.ledger_bench.ledger_level`: our ledger
client, 1 KiB adds, closed loop) on three upstream bookies and on three of ours. Each trio is a
cluster of its own (its own etcd, so placement picks exactly those three); all six bookies run
from the start of the run to its end, and the single-bookie rows use the first of each trio.
Each trio first takes an unreported ledger run.

    .venv/bin/python -m bench.upstream_bookie_bench [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import tempfile
from pathlib import Path

import uvloop

from bench.bookie_bench import (
    LEVELS,
    Result,
    bookie_level,
    raw_grouped,
    stop_bookie,
    wait_ready,
)
from bench.harness import REPO, machine
from bench.ledger_bench import ledger_level, start_bookies
from metastore.embedded import EmbeddedEtcd, free_port
from metastore.ledger_layout import set_up_ledgers_root
from metastore.store import parse_metadata_store_url
from metastore.versioned_keys import VersionedKeys
from tests.interop.upstream import UpstreamBookie, resolve
from tests.support import RawEtcd, wait_until


async def format_ledgers(etcd_url: str) -> None:
    keys = VersionedKeys(parse_metadata_store_url(etcd_url))
    try:
        await set_up_ledgers_root(keys)
    finally:
        await keys.close()


def row(label: str, result: Result) -> str:
    return f"| {label} | {result.outstanding} | {result.rate:,.0f} | {result.p50_ms:.2f} | " \
           f"{result.p99_ms:.2f} |"


LEDGER_OUTSTANDING = 64


def start_etcd(stack: contextlib.ExitStack, directory: Path) -> EmbeddedEtcd:
    etcd = EmbeddedEtcd(directory)
    etcd.start()
    stack.callback(etcd.stop)
    asyncio.run(format_ledgers(etcd.url))
    return etcd


def run(seconds: float = 3.0) -> str:
    classpath = resolve()
    lines = [machine(), "", "| target | outstanding | adds/s | p50 ms | p99 ms |",
             "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="upstream-bookie-bench-", dir=REPO) as tmp, \
            contextlib.ExitStack() as stack:
        workdir = Path(tmp)
        their_etcd = start_etcd(stack, workdir / "etcd-upstream")
        our_etcd = start_etcd(stack, workdir / "etcd-ours")
        theirs: list[UpstreamBookie] = []
        for i in range(3):
            theirs.append(UpstreamBookie(classpath, workdir / f"upstream{i}",
                                         f"metadata-store:{their_etcd.url}", free_port()))
            stack.callback(theirs[-1].stop)
        processes: list[subprocess.Popen[bytes]] = []
        try:
            ours = start_bookies(workdir, our_etcd.url, processes)
        finally:
            for process in processes:
                stack.callback(stop_bookie, process)
        raw = RawEtcd(their_etcd.endpoint)

        def registered() -> bool:
            return all(bookie.exited() is None
                       and raw.get(f"/ledgers/available/{bookie.bookie_id}") is not None
                       for bookie in theirs)

        wait_until(registered, timeout=180, interval=0.2)
        for bookie in theirs:
            asyncio.run(wait_ready(bookie.bookie_id))
        for address in (theirs[0].bookie_id, ours[0]):  # warm-up, not reported (the JIT)
            asyncio.run(bookie_level(address, 64, seconds, 100_000))
        for base, outstanding in enumerate(LEVELS):
            ledger_base = 1000 * (base + 1)
            lines.append(row("upstream bookie", asyncio.run(bookie_level(
                theirs[0].bookie_id, outstanding, seconds, ledger_base))))
            lines.append(row("our bookie", asyncio.run(bookie_level(
                ours[0], outstanding, seconds, ledger_base))))
            lines.append(row("raw pwrite+fdatasync", raw_grouped(
                workdir, outstanding, seconds)))
        for etcd in (their_etcd, our_etcd):  # warm-up, not reported
            uvloop.run(ledger_level(etcd.url, LEDGER_OUTSTANDING, seconds))
        lines += ["", "| ledger E=3/Qw=3/Qa=2 | outstanding | adds/s | p50 ms | p99 ms |",
                  "|---|---|---|---|---|"]
        for label, etcd in (("three upstream bookies", their_etcd), ("three of ours", our_etcd)):
            ledger = uvloop.run(ledger_level(etcd.url, LEDGER_OUTSTANDING, seconds))
            lines.append(f"| {label} | {LEDGER_OUTSTANDING} | {ledger.rate:,.0f} | "
                         f"{ledger.p50_ms:.2f} | {ledger.p99_ms:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.upstream_bookie_bench")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    print(run(args.seconds))


if __name__ == "__main__":
    main()
