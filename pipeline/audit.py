"""The placement audit on Spark (`run_audit`): `python -m pipeline audit --snapshot DIR --out DIR
[--master URL]` runs it.

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
5. Parquet tables, summary.json and report.html under `--out` (`pipeline.outputs`).

Outputs: fragment_verdicts/ and ledger_findings/ (one part per task);
aggregates.parquet, namespaces.parquet, repair_plan.parquet, unfixable.parquet,
summary.json, report.html.
Exit 2 with a message naming the problem when the snapshot is missing a table or a
column has the wrong type.
"""

from __future__ import annotations

import math
import pickle
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from pipeline.outputs import AuditSummary, AuditTotals, write_outputs
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
from pipeline.placement_inputs import build_placement_inputs
from pipeline.schema import (
    FRAGMENTS_DENORMALISED,
    TABLES,
    SnapshotError,
    check_snapshot,
    denormalised,
    read_table,
)
from placement.config import PlacementMode
from placement.violations import Violation

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
              ) -> AuditSummary:
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
    totals = AuditTotals(ns_names=ns_names, agg_rows=agg_rows, ns_rows=ns_rows,
                         ns_kinds=ns_kinds, plan_parts=plan_parts, fragments=n_fragments,
                         violating_ledgers=sum(p.violating_ledgers for p in parts),
                         check_seconds=check_seconds)
    summary = write_outputs(cluster, totals, out, snapshot=snapshot,
                            seconds=time.perf_counter() - started)
    for part in plan_parts:
        part.unlink()
    (out / PLAN_PARTS_DIR).rmdir()
    progress(f"5/5 wrote {out} in {summary.seconds:.1f}s")
    return summary


def _spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)
