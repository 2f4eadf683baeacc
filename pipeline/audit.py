"""`python -m pipeline.audit --snapshot DIR --out DIR [--master URL]`: the placement audit.

Stages (each printed with its elapsed time on stderr):

1. check the snapshot's tables (Parquet footers) and build the `Cluster` from the small
   tables on the driver; broadcast its int-encoded form (`BatchTopology`, `PolicyTable`);
2. join fragments to their ledgers (Qw, Qa, namespace -> policy index through a broadcast
   join) and judge every fragment with `placement.batch.check_batch` inside `mapInArrow`
   (numpy over int-encoded ensembles; no per-row Python anywhere);
3. per-ledger findings (Spark aggregation); ledgers, replicas and bytes per bookie, rack,
   region and group from a second `mapInArrow` that pre-aggregates each partition with
   numpy (a ledger's fragments share a partition after the join, so its distinct counts
   add up), per namespace from the ledgers table, violations per namespace and kind;
4. the repair plan for the violating fragments only (`pipeline.plan`, on the driver);
5. Parquet tables, summary.json and report.html under `--out`.

Outputs: fragment_verdicts/ and ledger_findings/ (Spark part files); aggregates.parquet,
namespaces.parquet, repair_plan.parquet, unfixable.parquet, summary.json, report.html.
Exit 2 with a message naming the problem when the snapshot is missing a table or a
column has the wrong type.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from pipeline.cluster import Cluster, build_cluster
from pipeline.io import padded, spark_session
from pipeline.plan import plan_fragment
from pipeline.report import render_report
from pipeline.schema import TABLES, SnapshotError, check_snapshot, read_table
from placement.batch import BatchTopology, PolicyTable, check_batch
from placement.config import PlacementConfig, PlacementMode
from placement.violations import Violation, kind_names

CHECKED = pa.schema([
    ("ledger_id", pa.int64()), ("segment", pa.int32()), ("first_entry_id", pa.int64()),
    ("last_entry_id", pa.int64()), ("ns_index", pa.int32()), ("policy", pa.int32()),
    ("write_quorum", pa.int32()), ("ack_quorum", pa.int32()),
    ("ensemble", pa.list_(pa.int32())), ("bytes", pa.float64()),
    ("adherence", pa.int32()), ("violations", pa.int32()),
])
PARTIAL = pa.schema([("dim", pa.string()), ("key", pa.int32()), ("ledgers", pa.int64()),
                     ("replicas", pa.int64()), ("violating_replicas", pa.int64()),
                     ("bytes", pa.float64())])
JOINED = CHECKED.names[:9]  # the columns check_partition passes through
DIMS = ("bookie", "rack", "region", "group")
KINDS = [v for v in Violation if v]
Tables = tuple[BatchTopology, PolicyTable, PlacementConfig]
Progress = Callable[[str], None]


def check_partition(batches: Iterator[pa.RecordBatch], tables: Tables
                    ) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: the batch check on each Arrow batch of joined fragments."""
    topology, policies, config = tables
    for b in batches:
        ens = padded(b.column("ensemble"))
        qw = b.column("write_quorum").to_numpy(zero_copy_only=False)
        verdict, kinds = check_batch(topology, policies, config, ens, qw,
                                     b.column("ack_quorum").to_numpy(zero_copy_only=False),
                                     b.column("policy").to_numpy(zero_copy_only=False))
        first = b.column("first_entry_id").to_numpy(zero_copy_only=False)
        last = b.column("last_entry_id").to_numpy(zero_copy_only=False)
        entries = b.column("ledger_last_entry_id").to_numpy(zero_copy_only=False) + 1
        length = b.column("length").to_numpy(zero_copy_only=False).astype(np.float64)
        nbytes = np.where(entries > 0, length * (last - first + 1) / np.maximum(entries, 1), 0.0)
        yield pa.RecordBatch.from_arrays(
            [b.column(c) for c in JOINED]
            + [pa.array(nbytes), pa.array(verdict.astype(np.int32)), pa.array(kinds)],
            schema=CHECKED)


def aggregate_partition(batches: Iterator[pa.RecordBatch], topology: BatchTopology
                        ) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: per-partition ledgers/replicas/bytes per bookie, rack, region, group.

    Stored bytes of a fragment spread over its E members as bytes x Qw / E each. The
    `namespace` rows (key: ns_index) count fragments, not replicas, and stored bytes.
    """
    ledgers, bookies, shares, bad = [], [], [], []
    per_ns: list[tuple[np.ndarray, ...]] = []
    for b in batches:
        ens = padded(b.column("ensemble"))
        valid = ens >= 0
        size = np.maximum(valid.sum(axis=1), 1)
        qw = b.column("write_quorum").to_numpy(zero_copy_only=False)
        share = b.column("bytes").to_numpy(zero_copy_only=False) * qw / size
        lid = b.column("ledger_id").to_numpy(zero_copy_only=False)
        viol = b.column("violations").to_numpy(zero_copy_only=False) != 0
        rows = np.nonzero(valid)[0]
        ns = b.column("ns_index").to_numpy(zero_copy_only=False)
        per_ns.append((lid, ns, viol, share * size))
        ledgers.append(lid[rows])
        bookies.append(ens[valid])
        shares.append(share[rows])
        bad.append(viol[rows])
    if not ledgers:
        return
    lid_m, bk = np.concatenate(ledgers), np.concatenate(bookies)
    share_m, bad_m = np.concatenate(shares), np.concatenate(bad)
    out: list[pa.RecordBatch] = []
    lid_f, ns_f, bad_f, stored_f = (np.concatenate(c) for c in zip(*per_ns, strict=True))
    for dim, key, lid_all, bad_all, share_all in (
            ("bookie", bk, lid_m, bad_m, share_m),
            ("rack", topology.rack[bk], lid_m, bad_m, share_m),
            ("region", topology.region[bk], lid_m, bad_m, share_m),
            ("group", topology.group[bk], lid_m, bad_m, share_m),
            ("namespace", ns_f, lid_f, bad_f, stored_f)):
        k = key.astype(np.int64) + 1  # group -1 (none) -> 0
        width = int(k.max()) + 1 if len(k) else 1
        pairs = np.unique(lid_all * width + k)
        n_ledgers = np.bincount(pairs % width, minlength=width)
        replicas = np.bincount(k, minlength=width)
        violating = np.bincount(k, weights=bad_all, minlength=width)
        nbytes = np.bincount(k, weights=share_all, minlength=width)
        present = np.flatnonzero(replicas)
        out.append(pa.RecordBatch.from_arrays([
            pa.array([dim] * len(present)), pa.array((present - 1).astype(np.int32)),
            pa.array(n_ledgers[present].astype(np.int64)),
            pa.array(replicas[present].astype(np.int64)),
            pa.array(violating[present].astype(np.int64)), pa.array(nbytes[present])],
            schema=PARTIAL))
    yield from out


def shuffle_partitions(fragments: int) -> int:
    """About 250k fragments per partition, 2..400."""
    return max(2, min(400, math.ceil(fragments / 250_000)))


def run_audit(spark: Any, snapshot: Path, out: Path, progress: Progress = lambda _: None
              ) -> dict[str, Any]:
    """Audit `snapshot` with `spark`, write every output under `out`, return the summary."""
    from pyspark.sql import functions as F
    from pyspark.storagelevel import StorageLevel

    started = time.perf_counter()
    paths = check_snapshot(snapshot)
    cluster = build_cluster(*(read_table(paths[t], TABLES[t])
                              for t in ("bookies", "policies", "config")))
    if cluster.config.mode is PlacementMode.ZONE:
        raise SnapshotError("table 'config': zone-aware placement is not covered by the batch "
                            "check (rack-aware and region-aware are)")
    n_fragments = ds.dataset(paths["fragments"], format="parquet").count_rows()
    spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions(n_fragments)))
    progress(f"1/5 snapshot: {n_fragments:,} fragments, {len(cluster.bookie_ids):,} bookies, "
             f"{len(cluster.namespaces):,} namespace policies")
    tables = spark.sparkContext.broadcast((cluster.batch, cluster.policies, cluster.config))
    topology_bc = spark.sparkContext.broadcast(cluster.batch)

    ledgers_raw = spark.read.parquet(str(paths["ledgers"]))
    ns_names = sorted(r[0] for r in ledgers_raw.select("namespace").distinct().collect())
    policy = cluster.policy_index()
    ns_df = spark.createDataFrame(
        [(ns, i, policy.get(ns, cluster.default_policy)) for i, ns in enumerate(ns_names)],
        "namespace string, ns_index int, policy int")
    names_df = F.broadcast(ns_df.select("ns_index", "namespace"))
    ledgers = (ledgers_raw
               .select("ledger_id", "namespace", "write_quorum", "ack_quorum", "length",
                       F.col("last_entry_id").alias("ledger_last_entry_id"))
               .join(F.broadcast(ns_df), "namespace").drop("namespace"))
    fragments = spark.read.parquet(str(paths["fragments"]))
    joined = fragments.join(ledgers, "ledger_id").select(
        *JOINED, "length", "ledger_last_entry_id")
    checked = joined.mapInArrow(lambda it: check_partition(it, tables.value),
                                _spark_schema(CHECKED))
    checked.persist(StorageLevel.MEMORY_AND_DISK)
    out.mkdir(parents=True, exist_ok=True)
    (checked.join(names_df, "ns_index").drop("ns_index", "policy")
     .write.mode("overwrite").parquet(str(out / "fragment_verdicts")))
    check_seconds = time.perf_counter() - started
    progress(f"2/5 every fragment judged in {check_seconds:.1f}s")

    partial = checked.mapInArrow(lambda it: aggregate_partition(it, topology_bc.value),
                                 _spark_schema(PARTIAL))
    agg_rows = (partial.groupBy("dim", "key")
                .agg(*(F.sum(c).alias(c) for c in PARTIAL.names[2:])).collect())
    violating = checked.filter("violations != 0").persist(StorageLevel.MEMORY_AND_DISK)
    checked.unpersist()
    findings = (violating.groupBy("ledger_id", "ns_index")
                .agg(F.bit_or("violations").alias("violations"),
                     F.count("*").alias("violating_fragments"),
                     F.sum("bytes").alias("violating_bytes")))
    (F.broadcast(findings).join(ledgers_raw.select("ledger_id", "state"), "ledger_id")
     .join(names_df, "ns_index").drop("ns_index")
     .write.mode("overwrite").parquet(str(out / "ledger_findings")))
    kind_cols = [F.sum(((F.col("violations").bitwiseAND(int(k))) != 0).cast("long"))
                 .alias(k.name or "") for k in KINDS]
    ns_kinds = {ns_names[r["ns_index"]]: r.asDict()
                for r in violating.groupBy("ns_index").agg(*kind_cols).collect()}
    ns_rows = (ledgers_raw.groupBy("namespace")
               .agg(F.count("*").alias("ledgers"), F.sum("length").alias("bytes"),
                    F.sum(F.col("length") * F.col("write_quorum")).alias("stored_bytes"))
               .collect())
    progress(f"3/5 findings and aggregates at {time.perf_counter() - started:.1f}s")

    plans = []
    for row in (violating.select("ledger_id", "segment", "ensemble", "write_quorum", "ack_quorum",
                        "policy", "bytes", "violations").toLocalIterator()):
        plans.append((row["ledger_id"], row["segment"], row["violations"], plan_fragment(
            cluster, row["ledger_id"], row["segment"], row["ensemble"],
            write_quorum=row["write_quorum"], ack_quorum=row["ack_quorum"],
            policy=row["policy"], nbytes=row["bytes"])))
    progress(f"4/5 repair plan for {len(plans):,} violating fragments at "
             f"{time.perf_counter() - started:.1f}s")
    violating.unpersist()

    summary = write_outputs(cluster, out, snapshot, ns_names, agg_rows, ns_rows, ns_kinds,
                            plans, n_fragments, check_seconds, time.perf_counter() - started)
    progress(f"5/5 wrote {out} in {summary['seconds']:.1f}s")
    return summary


def _spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def write_outputs(cluster: Cluster, out: Path, snapshot: Path, ns_names: list[str],
                  agg_rows: list[Any],
                  ns_rows: list[Any], ns_kinds: dict[str, dict[str, Any]],
                  plans: list[Any], n_fragments: int, check_seconds: float,
                  seconds: float) -> dict[str, Any]:
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
    for r in sorted(ns_rows, key=lambda r: r["namespace"]):
        kinds = ns_kinds.get(r["namespace"], {})
        namespaces.append({
            "namespace": r["namespace"], "ledgers": int(r["ledgers"]),
            "bytes": int(r["bytes"] or 0), "stored_bytes": int(r["stored_bytes"] or 0),
            "fragments": int(per_ns.get(r["namespace"], {}).get("replicas", 0)),
            "violating_fragments": int(per_ns.get(r["namespace"], {})
                                       .get("violating_replicas", 0)),
            **{k.name or "": int(kinds.get(k.name or "") or 0) for k in KINDS}})
    pq.write_table(pa.Table.from_pylist(namespaces), out / "namespaces.parquet")

    moves, unfixable = [], []
    for ledger_id, segment, kinds_before, plan in plans:
        moves += [{"ledger_id": m.ledger_id, "segment": m.segment, "position": m.position,
                   "bookie_out": cluster.bookie_ids[m.bookie_out],
                   "bookie_in": cluster.bookie_ids[m.bookie_in],
                   "bookie_out_index": m.bookie_out, "bookie_in_index": m.bookie_in,
                   "bytes": m.bytes} for m in plan.moves]
        if plan.remaining:
            unfixable.append({"ledger_id": ledger_id, "segment": segment,
                              "violations": int(kinds_before),
                              "remaining": int(plan.remaining),
                              "kinds": ",".join(kind_names(int(plan.remaining))),
                              "reason": plan.reason})
    pq.write_table(pa.Table.from_pylist(moves, schema=PLAN_SCHEMA), out / "repair_plan.parquet")
    pq.write_table(pa.Table.from_pylist(unfixable, schema=UNFIXABLE_SCHEMA),
                   out / "unfixable.parquet")
    load: dict[str, float] = {}
    for m in moves:
        load[m["bookie_in"]] = load.get(m["bookie_in"], 0.0) + m["bytes"]
        load[m["bookie_out"]] = load.get(m["bookie_out"], 0.0) - m["bytes"]

    by_kind = {k.name or "": sum(n[k.name or ""] for n in namespaces) for k in KINDS}
    summary = {
        "snapshot": str(snapshot),
        "placement_mode": cluster.config.mode.value,
        "fragments": n_fragments,
        "ledgers": sum(n["ledgers"] for n in namespaces),
        "violating_fragments": sum(n["violating_fragments"] for n in namespaces),
        "violating_ledgers": ds.dataset(out / "ledger_findings", format="parquet").count_rows(),
        "violations_by_kind": {k: v for k, v in by_kind.items() if v},
        "skew": {dim: skew([a["bytes"] for a in aggregates if a["dim"] == dim])
                 for dim in DIMS},
        "plan": {"moves": len(moves), "fragments": len(plans),
                 "fixed_fragments": len(plans) - len(unfixable),
                 "unfixable_fragments": len(unfixable),
                 "bytes_moved": sum(m["bytes"] for m in moves),
                 "load_added_per_bookie": dict(sorted(load.items(),
                                                      key=lambda kv: -kv[1])[:50])},
        "check_seconds": round(check_seconds, 2),
        "seconds": round(seconds, 2),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "report.html").write_text(render_report(summary, aggregates, namespaces,
                                                   unfixable, cluster))
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
