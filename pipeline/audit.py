"""`python -m pipeline.audit --snapshot DIR --out DIR [--master URL]`: the placement audit.

Stages (each printed with its elapsed time on stderr):

1. check the snapshot's tables (Parquet footers) and build the `PlacementInputs` from the small
   tables on the driver; broadcast it (its int-encoded form `BatchTopology`, `PolicyTable`
   for the check, the whole of it for the repair plan); ledgers and bytes per namespace
   from Python tasks that read the `ledgers` files with pyarrow (which also names the
   namespaces);
2. judge every fragment with `placement.batch.check_batch` inside `mapInArrow` (numpy over
   int-encoded ensembles; no per-row Python anywhere). When `fragments` carries its
   ledger's columns (`schema.LEDGER_COLUMNS`, written by synth and snapshot) each task gets
   only a list of whole part files, reads them itself with pyarrow and writes its own
   verdict part, so the fragments never pass through the JVM; otherwise fragments are
   joined to `ledgers` and repartitioned by ledger id, and each partition's task writes its
   part the same way. Either way a ledger's fragments share a task, which also computes
   that task's aggregates (ledgers, replicas and bytes per bookie, rack, region, group and
   namespace), per-ledger findings, violations per namespace and kind, and the repair plan
   of its violating fragments (`pipeline.plan`); it writes its findings and plan as part
   files beside its verdicts and returns only its aggregates and counts as its one row;
3. the driver adds up the tasks' aggregates;
4. the driver gathers the plan parts into repair_plan.parquet and unfixable.parquet one
   part at a time (its memory does not grow with the number of violations);
5. Parquet tables, summary.json and report.html under `--out`.

Outputs: fragment_verdicts/ and ledger_findings/ (one part per task);
aggregates.parquet, namespaces.parquet, repair_plan.parquet, unfixable.parquet,
summary.json, report.html.
Exit 2 with a message naming the problem when the snapshot is missing a table or a
column has the wrong type.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from pipeline.io import spark_session
from pipeline.partitions import (
    FINDINGS_DIR,
    NS_KINDS,
    NS_TOTALS,
    PARTIAL,
    PLAN_PARTS_DIR,
    TASK_RESULT,
    Judge,
    PartitionResult,
    audit_files,
    audit_partition,
    namespace_totals,
)
from pipeline.placement_inputs import PlacementInputs, build_placement_inputs
from pipeline.report import render_report
from pipeline.schema import (
    FRAGMENTS_DENORMALISED,
    TABLES,
    SnapshotError,
    check_snapshot,
    denormalised,
    read_table,
)
from placement.config import PlacementMode
from placement.violations import Violation, kind_names

DIMS = ("bookie", "rack", "region", "group")
KINDS = [v for v in Violation if v]
Progress = Callable[[str], None]


def shuffle_partitions(fragments: int) -> int:
    """About 250k fragments per partition, 2..400."""
    return max(2, min(400, math.ceil(fragments / 250_000)))


def fragment_files(fragments: Path) -> list[Path]:
    """The Parquet part files of the `fragments` table (as Spark lists them: hidden and
    `_`-prefixed files skipped), in name order."""
    if fragments.is_file():
        return [fragments]
    return sorted(f for f in fragments.rglob("*.parquet")
                  if not any(part.startswith(("_", ".")) for part in
                             f.relative_to(fragments).parts))


def file_tasks(files: Sequence[Path], tasks: int) -> list[list[str]]:
    """`files` dealt to at most `tasks` tasks, whole files only (a ledger's fragments are
    in one file), balancing bytes: largest file first onto the lightest task."""
    bins: list[tuple[int, int, list[str]]] = [(0, i, []) for i in range(max(1, min(tasks,
                                                                                 len(files))))]
    for f in sorted(files, key=lambda f: -f.stat().st_size):
        size, i, paths = min(bins)
        bins[bins.index((size, i, paths))] = (size + f.stat().st_size, i, [*paths, str(f)])
    return [sorted(paths) for _, _, paths in sorted(bins, key=lambda b: b[1]) if paths]


def _file_tasks_frame(spark: Any, groups: list[list[str]]) -> Any:
    """A DataFrame of TASKS rows (part, paths), one partition per row."""
    rows = [(i, [str(Path(f).resolve()) for f in g]) for i, g in enumerate(groups)]
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, max(1, len(rows))),
                                 "part int, paths array<string>")


def run_audit(spark: Any, snapshot: Path, out: Path, progress: Progress = lambda _: None
              ) -> dict[str, Any]:
    """Audit `snapshot` with `spark`, write every output under `out`, return the summary."""
    from pyspark.sql import functions as F

    started = time.perf_counter()
    paths = check_snapshot(snapshot)
    cluster = build_placement_inputs(*(read_table(paths[t], TABLES[t])
                              for t in ("bookies", "policies", "config")))
    if cluster.config.mode is PlacementMode.ZONE:
        raise SnapshotError("table 'config': zone-aware placement is not covered by the batch "
                            "check (rack-aware and region-aware are)")
    n_fragments = ds.dataset(paths["fragments"], format="parquet").count_rows()
    partitions = shuffle_partitions(n_fragments)
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    flat = denormalised(paths["fragments"])

    ledgers_raw = spark.read.parquet(str(paths["ledgers"]))  # lazy: read only to join
    # ledgers and bytes per namespace: Python tasks read the `ledgers` files with pyarrow
    ns_totals = (_file_tasks_frame(spark, file_tasks(fragment_files(paths["ledgers"]),
                                                     partitions))
                 .mapInArrow(namespace_totals, _spark_schema(NS_TOTALS)).collect())
    ns_sum: dict[str | None, dict[str, Any]] = {}
    for r in ns_totals:
        row = ns_sum.setdefault(r["namespace"], {"namespace": r["namespace"], "ledgers": 0,
                                                 "bytes": 0, "stored_bytes": 0})
        for k in ("ledgers", "bytes", "stored_bytes"):
            row[k] += r[k] or 0
    ns_rows = list(ns_sum.values())
    named = sorted(r["namespace"] for r in ns_rows if r["namespace"] is not None)
    ns_names: list[str | None] = [*named, *([None] if len(named) < len(ns_rows) else [])]
    judge = spark.sparkContext.broadcast(Judge(cluster, ns_names))
    progress(f"1/5 snapshot: {n_fragments:,} fragments, {len(cluster.bookie_ids):,} bookies, "
             f"{len(ns_names):,} namespaces ({len(cluster.namespaces):,} with a policy row); "
             + ("fragments carry their ledger's columns: no join" if flat
                else "joining fragments to ledgers"))

    verdict_dir = out / "fragment_verdicts"
    task_dirs = (verdict_dir, out / FINDINGS_DIR, out / PLAN_PARTS_DIR)
    for directory in task_dirs:
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.iterdir():
            if old.is_file():
                old.unlink()
    target = str(verdict_dir.resolve())
    result_schema = _spark_schema(TASK_RESULT)
    if flat:
        # each task reads its own part files with pyarrow and writes its own verdict part:
        # only the file names go in and the per-task results come out through the JVM
        tasks = _file_tasks_frame(spark, file_tasks(fragment_files(paths["fragments"]),
                                                    partitions))
        returned = tasks.mapInArrow(lambda it: audit_files(it, judge.value, target),
                                    result_schema).collect()
    else:
        ledger_cols = ledgers_raw.select(
            "ledger_id", "namespace", "state", "write_quorum", "ack_quorum",
            F.col("length").alias("ledger_length"),
            F.col("last_entry_id").alias("ledger_last_entry_id"))
        fragments = (spark.read.parquet(str(paths["fragments"]))
                     .select(*TABLES["fragments"].names)
                     .join(ledger_cols, "ledger_id")
                     .repartition(partitions, "ledger_id")
                     .select(*FRAGMENTS_DENORMALISED.names))
        returned = fragments.mapInArrow(lambda it: audit_partition(it, judge.value, target),
                                        result_schema).collect()
    results = {r["part"]: r for r in returned}  # a re-run task's part replaces itself
    written = {r["file"] for r in results.values()}
    for directory in task_dirs:
        for stray in {p.name for p in directory.iterdir()} - written:
            (directory / stray).unlink()  # e.g. a temporary file of a killed attempt
    check_seconds = time.perf_counter() - started
    parts: list[PartitionResult] = [pickle.loads(results[k]["result"]) for k in sorted(results)]
    judged = sum(int(r["fragments"]) for r in results.values())
    if judged != n_fragments:
        raise RuntimeError(f"the check judged {judged:,} fragments of {n_fragments:,}")
    progress(f"2/5 every fragment judged, {len(parts)} partitions, in {check_seconds:.1f}s")

    partial = pa.concat_tables([p.partial for p in parts] or [PARTIAL.empty_table()])
    agg_rows = [{k.removesuffix("_sum"): v for k, v in r.items()}
                for r in partial.group_by(["dim", "key"], use_threads=False)
                .aggregate([(c, "sum") for c in PARTIAL.names[2:]]).to_pylist()]
    kinds = pa.concat_tables([p.ns_kinds for p in parts] or [NS_KINDS.empty_table()])
    ns_kinds: dict[str | None, dict[str, Any]] = {}
    for r in (kinds.group_by(["ns_index", "kind"], use_threads=False)
              .aggregate([("fragments", "sum")]).to_pylist()):
        name = Violation(r["kind"]).name or ""
        ns_kinds.setdefault(ns_names[r["ns_index"]], {})[name] = r["fragments_sum"]
    progress(f"3/5 findings and aggregates at {time.perf_counter() - started:.1f}s")
    n_planned = sum(p.violating_fragments for p in parts)
    progress(f"4/5 repair plan for {n_planned:,} violating fragments (made in the executors)")

    plan_parts = sorted((out / PLAN_PARTS_DIR).glob("part-*.parquet"))
    summary = write_outputs(cluster, out, snapshot, ns_names, agg_rows, ns_rows, ns_kinds,
                            plan_parts, n_fragments, check_seconds,
                            time.perf_counter() - started,
                            violating_ledgers=sum(p.violating_ledgers for p in parts))
    for part in plan_parts:
        part.unlink()
    (out / PLAN_PARTS_DIR).rmdir()
    progress(f"5/5 wrote {out} in {summary['seconds']:.1f}s")
    return summary


def _spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def write_outputs(cluster: PlacementInputs, out: Path, snapshot: Path,
                  ns_names: Sequence[str | None], agg_rows: list[Any],
                  ns_rows: list[Any], ns_kinds: dict[str | None, dict[str, Any]],
                  plan_parts: Sequence[Path], n_fragments: int, check_seconds: float,
                  seconds: float, *, violating_ledgers: int) -> dict[str, Any]:
    """aggregates.parquet, namespaces.parquet, repair_plan.parquet and unfixable.parquet
    (gathered from the tasks' plan parts one part at a time, so the driver's memory does not
    grow with the number of violations), summary.json and report.html."""
    racks, regions = cluster.location_names()
    names = {"bookie": list(cluster.bookie_ids), "rack": racks, "region": regions,
             "group": list(cluster.batch.groups), "namespace": ns_names}
    aggregates = [{"dim": r["dim"], "key": r["key"],
                   "name": "(no group)" if r["dim"] == "group" and r["key"] < 0
                   else names[r["dim"]][r["key"]],
                   "ledgers": int(r["ledgers"]), "replicas": int(r["replicas"]),
                   "violating_replicas": int(r["violating_replicas"]),
                   "bytes": float(r["bytes"])} for r in agg_rows]
    per_ns = {a["name"]: a for a in aggregates if a["dim"] == "namespace"}
    aggregates = [a for a in aggregates if a["dim"] != "namespace"]
    # bookies that hold nothing still count for skew
    held = {a["key"] for a in aggregates if a["dim"] == "bookie"}
    aggregates += [{"dim": "bookie", "key": i, "name": b, "ledgers": 0, "replicas": 0,
                    "violating_replicas": 0, "bytes": 0.0}
                   for i, b in enumerate(cluster.bookie_ids)
                   if i not in held and b in cluster.topology.writable]
    aggregates.sort(key=lambda a: (a["dim"], a["key"]))
    pq.write_table(pa.Table.from_pylist(aggregates), out / "aggregates.parquet")

    namespaces = []
    for r in sorted(ns_rows, key=lambda r: (r["namespace"] is None, r["namespace"] or "")):
        kinds = ns_kinds.get(r["namespace"], {})
        namespaces.append({
            "namespace": r["namespace"], "ledgers": int(r["ledgers"]),
            "bytes": int(r["bytes"] or 0), "stored_bytes": int(r["stored_bytes"] or 0),
            "fragments": int(per_ns.get(r["namespace"], {}).get("replicas", 0)),
            "violating_fragments": int(per_ns.get(r["namespace"], {})
                                       .get("violating_replicas", 0)),
            **{k.name or "": int(kinds.get(k.name or "") or 0) for k in KINDS}})
    pq.write_table(pa.Table.from_pylist(namespaces), out / "namespaces.parquet")

    ids = cluster.bookie_ids
    id_array = pa.array(ids, pa.string())
    net = np.zeros(len(ids), np.float64)
    touched = np.zeros(len(ids), bool)
    n_planned = n_moves = n_unfixable = 0
    bytes_moved = 0.0
    reasons: Counter[str] = Counter()
    with pq.ParquetWriter(out / "repair_plan.parquet", PLAN_SCHEMA) as plan_writer, \
            pq.ParquetWriter(out / "unfixable.parquet", UNFIXABLE_SCHEMA) as unfixable_writer:
        for part in plan_parts:
            planned = pq.read_table(part)
            heads = planned.filter(pc.equal(planned.column("position"), -1)).sort_by(
                [("ledger_id", "ascending"), ("segment", "ascending")])
            steps = planned.filter(pc.greater_equal(planned.column("position"), 0)).sort_by(
                [("ledger_id", "ascending"), ("segment", "ascending"),
                 ("position", "ascending")])
            out_index = steps.column("bookie_out_index").cast(pa.int32())
            in_index = steps.column("bookie_in_index").cast(pa.int32())
            moves = pa.table([steps.column("ledger_id"), steps.column("segment"),
                              steps.column("position"), pc.take(id_array, out_index),
                              pc.take(id_array, in_index), out_index, in_index,
                              steps.column("bytes")], schema=PLAN_SCHEMA)
            plan_writer.write_table(moves)
            unfixable = [{"ledger_id": h["ledger_id"], "segment": h["segment"],
                          "violations": h["violations"], "remaining": h["remaining"],
                          "kinds": ",".join(kind_names(h["remaining"])), "reason": h["reason"]}
                         for h in heads.filter(pc.not_equal(heads.column("remaining"), 0))
                         .to_pylist()]
            unfixable_writer.write_table(pa.Table.from_pylist(unfixable,
                                                              schema=UNFIXABLE_SCHEMA))
            reasons.update(u["kinds"] + ": " + u["reason"][:160] for u in unfixable)
            moved = moves.column("bytes").to_numpy()
            in_np = in_index.to_numpy(zero_copy_only=False)
            out_np = out_index.to_numpy(zero_copy_only=False)
            net += (np.bincount(in_np, weights=moved, minlength=len(ids))
                    - np.bincount(out_np, weights=moved, minlength=len(ids)))
            touched[in_np] = True
            touched[out_np] = True
            n_planned += heads.num_rows
            n_moves += moves.num_rows
            n_unfixable += len(unfixable)
            bytes_moved += float(moved.sum())
    hit = np.flatnonzero(touched)
    top = hit[np.argsort(-net[hit], kind="stable")][:50]

    by_kind = {k.name or "": sum(n[k.name or ""] for n in namespaces) for k in KINDS}
    summary = {
        "snapshot": str(snapshot),
        "placement_mode": cluster.config.mode.value,
        "fragments": n_fragments,
        "ledgers": sum(n["ledgers"] for n in namespaces),
        "violating_fragments": sum(n["violating_fragments"] for n in namespaces),
        "violating_ledgers": violating_ledgers,
        "violations_by_kind": {k: v for k, v in by_kind.items() if v},
        "skew": {dim: skew([a["bytes"] for a in aggregates if a["dim"] == dim])
                 for dim in DIMS},
        "plan": {"moves": n_moves, "fragments": n_planned,
                 "fixed_fragments": n_planned - n_unfixable,
                 "unfixable_fragments": n_unfixable,
                 "bytes_moved": bytes_moved,
                 "load_added_per_bookie": {ids[i]: float(net[i]) for i in top}},
        "check_seconds": round(check_seconds, 2),
        "seconds": round(seconds, 2),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "report.html").write_text(render_report(summary, aggregates, namespaces,
                                                   reasons, cluster))
    return summary


PLAN_SCHEMA = pa.schema([("ledger_id", pa.int64()), ("segment", pa.int32()),
                         ("position", pa.int32()), ("bookie_out", pa.string()),
                         ("bookie_in", pa.string()), ("bookie_out_index", pa.int32()),
                         ("bookie_in_index", pa.int32()), ("bytes", pa.float64())])
UNFIXABLE_SCHEMA = pa.schema([("ledger_id", pa.int64()), ("segment", pa.int32()),
                              ("violations", pa.int32()), ("remaining", pa.int32()),
                              ("kinds", pa.string()), ("reason", pa.string())])


def skew(values: list[float]) -> dict[str, float]:
    """max/mean and the coefficient of variation (std/mean) of a load distribution."""
    if not values:
        return {"count": 0, "max_over_mean": 0.0, "cv": 0.0}
    arr = np.asarray(values, np.float64)
    mean = float(arr.mean())
    return {"count": len(values), "min": float(arr.min()), "max": float(arr.max()),
            "mean": mean, "max_over_mean": float(arr.max() / mean) if mean else 0.0,
            "cv": float(arr.std() / mean) if mean else 0.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.audit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--snapshot", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    parser.add_argument("--driver-memory", default="2g")
    args = parser.parse_args(argv)

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
        summary = run_audit(spark, args.snapshot, args.out, progress)
    except SnapshotError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    print(json.dumps({k: summary[k] for k in ("fragments", "ledgers", "violating_fragments",
                                              "violating_ledgers", "violations_by_kind",
                                              "seconds")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
