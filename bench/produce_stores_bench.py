"""REST produce with the metadata on etcd and on ZooKeeper, in the same run.

For each store: the store (an embedded etcd, or Debian's ZooKeeper with the chroot `/pulsar`),
three bookie processes registered in it and the service on it; then `POST
/topics/persistent/...` with batches of 100 messages of 1 KiB (one client, one batch at a
time, as `bench.ledger_bench`'s REST part), messages/s and p50/p99 per batch. The stores take
turns (etcd, ZooKeeper, etcd, ZooKeeper, ...) so that a change of load on the machine falls on
both; each store's best round is reported, and ZooKeeper's rate as a share of etcd's (the
target: within 20% of each other). A produce reads the namespace's policies from the service's
watch-fed caches, so what differs is the managed ledger's and the ledgers' metadata writes.

    .venv/bin/python -m bench.produce_stores_bench [--seconds 5] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.harness import REPO, BenchServer, machine
from bench.ledger_bench import Result, rest_produce, start_bookies
from metastore.embedded import EmbeddedEtcd
from metastore.embedded_zookeeper import EmbeddedZooKeeper

STORES = ("etcd", "zookeeper")


class _StoreUrl:
    """What `BenchServer` reads of its store: the URL the service is started with."""

    def __init__(self, url: str) -> None:
        self.url = url


def produce_on(store: str, workdir: Path, seconds: float) -> Result:
    """One round: a fresh store of the kind, three bookies and the service on it."""
    stop: Callable[[], None]
    if store == "etcd":
        etcd = EmbeddedEtcd(workdir / "etcd")
        etcd.start()
        url, stop = etcd.url, etcd.stop
    else:
        zookeeper = EmbeddedZooKeeper(workdir / "zookeeper")
        zookeeper.start()
        url, stop = f"zk:{zookeeper.hosts()}/pulsar", zookeeper.stop
    processes: list[subprocess.Popen[bytes]] = []
    try:
        start_bookies(workdir, url, processes)
        with BenchServer(_StoreUrl(url), workdir) as server:  # type: ignore[arg-type]
            return rest_produce(server, seconds)
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
        stop()


def run(seconds: float = 5.0, rounds: int = 2) -> str:
    best: dict[str, Result] = {}
    for round_ in range(rounds):
        for store in STORES:
            with tempfile.TemporaryDirectory(prefix=f"produce-{store}-", dir=REPO) as tmp:
                found = produce_on(store, Path(tmp), seconds)
            if store not in best or found.rate > best[store].rate:
                best[store] = found
            print(f"round {round_ + 1} {store}: {found.rate:,.0f} messages/s", flush=True)
    etcd, zookeeper = best["etcd"], best["zookeeper"]
    lines = [
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.1f} at the end; "
        f"{rounds} rounds of {seconds:.0f} s per store, alternating, best round shown",
        "",
        "| metadata store | REST produce messages/s (batches of 100 x 1 KiB) "
        "| p50 / p99 ms per batch | / etcd |",
        "|---|---|---|---|",
    ]
    for name, result in (("etcd", etcd), ("ZooKeeper", zookeeper)):
        lines.append(f"| {name} | {result.rate:,.0f} | {result.p50_ms:.1f} / "
                     f"{result.p99_ms:.1f} | {result.rate / etcd.rate:.0%} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.produce_stores_bench")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    print(run(args.seconds, args.rounds))


if __name__ == "__main__":
    main()
