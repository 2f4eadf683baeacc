"""`python -m pipeline <command>`: the pipeline's command line.

    snapshot   a cluster's metadata (etcd or ZooKeeper) as the snapshot's Parquet tables
    audit      the placement audit of a snapshot, on Spark
    synth      a synthetic snapshot at any size, with known violations

Each command prints one JSON line of counts on stdout, its progress on stderr, and exits 2
with a message naming the problem on bad input (a store it cannot read, a snapshot missing a
table or holding a column of the wrong type).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from javaformats import parse_broker_conf
from pipeline import audit, snapshot, synth
from pipeline.io import spark_session
from pipeline.schema import SnapshotError, check_snapshot
from pipeline.sources import SnapshotSourceError
from placement import PlacementConfig

Command = Callable[[argparse.Namespace], int]


# -- snapshot ----------------------------------------------------------------------------------


class _Progress:
    """`N ledgers (rate/s)` on stderr: rewritten in place on a terminal, else every 2 s."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = -1e9  # the first page is always reported

    def __call__(self, count: int, elapsed: float) -> None:
        if not self.tty and elapsed - self.last < 2.0:
            return
        self.last = elapsed
        line = f"snapshot: {count} ledgers read ({count / max(elapsed, 1e-9):.0f}/s)"
        print(f"\r{line}" if self.tty else line, end="" if self.tty else "\n",
              file=sys.stderr, flush=True)


def _snapshot_parser(parser: argparse.ArgumentParser) -> Command:
    parser.add_argument("--metadata-store-url",
                        help="etcd:http://h:p[,h:p] or zk:h:p[,h:p] (default: metadataStoreUrl "
                             "of --config)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--config", type=Path, help="broker.conf with the placement settings")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker.conf key, overriding --config (repeatable)")
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=4,
                        help="pages of ledger metadata read at once (default 4)")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--no-bookie-info", action="store_true",
                        help="do not ask the registered bookies for their disk figures "
                             "(GET_BOOKIE_INFO): disk columns null")
    return _run_snapshot


def _run_snapshot(args: argparse.Namespace) -> int:
    try:
        conf = parse_broker_conf(args.config.read_text(), str(args.config)) if args.config else {}
        for item in args.set:
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"--set {item!r}: expected KEY=VALUE")
            conf[key.strip()] = value.strip()
        cfg = PlacementConfig.from_broker_conf(conf)
        url = args.metadata_store_url or conf.get("metadataStoreUrl")
        if not url:
            raise ValueError("no metadata store: give --metadata-store-url or metadataStoreUrl "
                             "in --config")
        if args.page_size < 1 or args.concurrency < 1:
            raise ValueError("--page-size and --concurrency must be at least 1")
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    progress = _Progress()
    try:
        counts = asyncio.run(snapshot.snapshot(url, args.out, cfg, page_size=args.page_size,
                                               concurrency=args.concurrency, progress=progress,
                                               timeout=args.timeout,
                                               bookie_info=not args.no_bookie_info))
    except SnapshotSourceError as exc:
        if progress.tty:
            print(file=sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - started
    if progress.tty:
        print(file=sys.stderr)
    print(f"snapshot: {counts['ledgers']} ledgers, {counts['fragments']} fragments, "
          f"{counts['bookies']} bookies in {seconds:.1f}s -> {args.out}", file=sys.stderr)
    print(json.dumps({**counts, "seconds": round(seconds, 2)}))
    return 0


# -- audit -------------------------------------------------------------------------------------


def _audit_parser(parser: argparse.ArgumentParser) -> Command:
    parser.add_argument("--snapshot", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    parser.add_argument("--driver-memory", default="2g")
    return _run_audit


def _run_audit(args: argparse.Namespace) -> int:
    started = time.perf_counter()

    def progress(line: str) -> None:
        print(f"[audit {time.perf_counter() - started:6.1f}s] {line}", file=sys.stderr,
              flush=True)

    try:
        check_snapshot(args.snapshot)  # fail before starting a JVM
    except SnapshotError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    progress(f"starting Spark ({args.master or 'local[*]'}); its own log: {args.out}/spark.log")
    spark = spark_session(args.master, driver_memory=args.driver_memory,
                          jvm_log=args.out / "spark.log")
    try:
        summary = audit.run_audit(spark, args.snapshot, args.out, progress)
    except SnapshotError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    document = summary.as_json()
    print(json.dumps({k: document[k] for k in ("fragments", "ledgers", "violating_fragments",
                                               "violating_ledgers", "violations_by_kind",
                                               "seconds")}))
    return 0


# -- synth -------------------------------------------------------------------------------------


def _synth_parser(parser: argparse.ArgumentParser) -> Command:
    parser.add_argument("--ledgers", type=int, required=True)
    parser.add_argument("--bookies", type=int, default=300)
    parser.add_argument("--racks", type=int, default=10)
    parser.add_argument("--groups", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--namespaces", type=int, default=12)
    parser.add_argument("--rate", type=float, default=0.002,
                        help="share of fragments given each kind of fault (default 0.002)")
    parser.add_argument("--no-enforce", action="store_true",
                        help="config without enforceMinNumRacksPerWriteQuorum")
    parser.add_argument("--degraded", action="store_true",
                        help="group-0 read-only outside rack-00 (faults a plan cannot fix)")
    parser.add_argument("--out", type=Path, required=True)
    return _run_synth


def _run_synth(args: argparse.Namespace) -> int:
    spec = synth.SynthSpec(args.ledgers, args.bookies, args.racks, args.groups, args.seed,
                           args.namespaces, not args.no_enforce, args.degraded,
                           dict.fromkeys(synth.KINDS, args.rate))
    started = time.perf_counter()
    try:
        counts = synth.generate(spec, args.out)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    counts["seconds"] = round(time.perf_counter() - started, 2)
    print(json.dumps(counts))
    return 0


# -- the entry ---------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = root.add_subparsers(dest="command", required=True, metavar="command")
    for name, module, build in (("snapshot", snapshot, _snapshot_parser),
                                ("audit", audit, _audit_parser),
                                ("synth", synth, _synth_parser)):
        doc = module.__doc__ or ""
        sub = commands.add_parser(name, help=doc.splitlines()[0], description=doc,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.set_defaults(run=build(sub))
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    run: Command = args.run
    return run(args)
