"""The peer figure: one upstream bookie (BookKeeper 4.17.2's own server, default settings, from
the jars of tests/interop) and one of ours, under the same client and load, beside the raw
grouped pwrite+fdatasync loop, all in the same run on the same file system.

Closed loop as `bench.bookie_bench`: N coroutines on one `BookieClient` connection (V2), 1 KiB
adds, each sent as soon as the previous one is acknowledged, at 1, 8, 64 and 256 outstanding;
the raw loop writes N records per pwrite+fdatasync. Both bookies acknowledge an add after the
fsync of its journal group (upstream: `journalSyncData=true`, its default; and its default
`journalMaxGroupWaitMSec=2`, the wait for more adds before a group is written). Each bookie
first takes a 64-outstanding run that is not reported, so the JVM's JIT has compiled the path.

    .venv/bin/python -m bench.upstream_bookie_bench [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from bench.bookie_bench import (
    LEVELS,
    Result,
    bookie_level,
    raw_grouped,
    start_bookie,
    stop_bookie,
    wait_ready,
)
from bench.harness import REPO, machine
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


def run(seconds: float = 3.0) -> str:
    classpath = resolve()
    lines = [machine(), "", "| target | outstanding | adds/s | p50 ms | p99 ms |",
             "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="upstream-bookie-bench-", dir=REPO) as tmp:
        workdir = Path(tmp)
        etcd = EmbeddedEtcd(workdir / "etcd")
        etcd.start()
        try:
            asyncio.run(format_ledgers(etcd.url))
            raw = RawEtcd(etcd.endpoint)
            ours, process = start_bookie(workdir, "ours", etcd.url)
            theirs = UpstreamBookie(classpath, workdir / "upstream",
                                    f"metadata-store:{etcd.url}", free_port())
            try:
                registered = f"/ledgers/available/{theirs.bookie_id}"
                wait_until(lambda: theirs.exited() is None and raw.get(registered) is not None,
                           timeout=120, interval=0.2)
                asyncio.run(wait_ready(theirs.bookie_id))
                for address in (theirs.bookie_id, ours):  # warm-up, not reported (the JIT)
                    asyncio.run(bookie_level(address, 64, seconds, 100_000))
                for base, outstanding in enumerate(LEVELS):
                    ledger_base = 1000 * (base + 1)
                    lines.append(row("upstream bookie", asyncio.run(bookie_level(
                        theirs.bookie_id, outstanding, seconds, ledger_base))))
                    lines.append(row("our bookie", asyncio.run(bookie_level(
                        ours, outstanding, seconds, ledger_base))))
                    lines.append(row("raw pwrite+fdatasync", raw_grouped(
                        workdir, outstanding, seconds)))
            finally:
                theirs.stop()
                stop_bookie(process)
        finally:
            etcd.stop()
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.upstream_bookie_bench")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    print(run(args.seconds))


if __name__ == "__main__":
    main()
