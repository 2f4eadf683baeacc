"""The audit's outputs, written on the driver from what the tasks returned (`AuditTotals`):

    aggregates.parquet   ledgers, replicas and bytes per bookie, rack, region and group
    namespaces.parquet   per namespace: ledgers, bytes, fragments, violations by kind
    repair_plan.parquet  the planned moves, gathered from the tasks' plan parts one part at a
                         time (the driver's memory does not grow with the violations)
    unfixable.parquet    the violating fragments no move can fix, with the reason
    summary.json         `AuditSummary.as_json()`
    report.html          a self-contained report (`pipeline.report`)
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.placement_inputs import PlacementInputs
from pipeline.report import render_report
from placement.violations import Violation, kind_names

DIMS = ("bookie", "rack", "region", "group")
KINDS = [v for v in Violation if v]


@dataclass(frozen=True)
class AuditTotals:
    """What the driver gathered from the tasks: the namespaces by index, the summed
    aggregates, ledgers and bytes per namespace, violations per namespace and kind, the
    tasks' plan parts, and the counts."""

    ns_names: Sequence[str | None]
    agg_rows: list[dict[str, Any]]
    ns_rows: list[dict[str, Any]]
    ns_kinds: dict[str | None, dict[str, int]]
    plan_parts: Sequence[Path]
    fragments: int
    violating_ledgers: int
    check_seconds: float


@dataclass(frozen=True)
class PlanSummary:
    """The repair plan in figures; `load_added_per_bookie`: the 50 bookies it adds most to."""

    moves: int
    fragments: int
    fixed_fragments: int
    unfixable_fragments: int
    bytes_moved: float
    load_added_per_bookie: dict[str, float]


@dataclass(frozen=True)
class AuditSummary:
    """The audit in figures, as summary.json holds it (`as_json`)."""

    snapshot: str
    placement_mode: str
    fragments: int
    ledgers: int
    violating_fragments: int
    violating_ledgers: int
    violations_by_kind: dict[str, int]
    skew: dict[str, dict[str, float]]
    plan: PlanSummary
    check_seconds: float
    seconds: float

    def as_json(self) -> dict[str, Any]:
        return {
            "snapshot": self.snapshot, "placement_mode": self.placement_mode,
            "fragments": self.fragments, "ledgers": self.ledgers,
            "violating_fragments": self.violating_fragments,
            "violating_ledgers": self.violating_ledgers,
            "violations_by_kind": self.violations_by_kind, "skew": self.skew,
            "plan": {"moves": self.plan.moves, "fragments": self.plan.fragments,
                     "fixed_fragments": self.plan.fixed_fragments,
                     "unfixable_fragments": self.plan.unfixable_fragments,
                     "bytes_moved": self.plan.bytes_moved,
                     "load_added_per_bookie": self.plan.load_added_per_bookie},
            "check_seconds": self.check_seconds, "seconds": self.seconds,
        }


def write_outputs(inputs: PlacementInputs, totals: AuditTotals, out: Path, *, snapshot: Path,
                  seconds: float) -> AuditSummary:
    """Every output of the module docstring under `out`; the summary."""
    ns_names = totals.ns_names
    racks, regions = inputs.location_names()
    names = {"bookie": list(inputs.bookie_ids), "rack": racks, "region": regions,
             "group": list(inputs.batch.groups), "namespace": ns_names}
    aggregates = [{"dim": r["dim"], "key": r["key"],
                   "name": "(no group)" if r["dim"] == "group" and r["key"] < 0
                   else names[r["dim"]][r["key"]],
                   "ledgers": int(r["ledgers"]), "replicas": int(r["replicas"]),
                   "violating_replicas": int(r["violating_replicas"]),
                   "bytes": float(r["bytes"])} for r in totals.agg_rows]
    per_ns = {a["name"]: a for a in aggregates if a["dim"] == "namespace"}
    aggregates = [a for a in aggregates if a["dim"] != "namespace"]
    # bookies that hold nothing still count for skew
    held = {a["key"] for a in aggregates if a["dim"] == "bookie"}
    aggregates += [{"dim": "bookie", "key": i, "name": b, "ledgers": 0, "replicas": 0,
                    "violating_replicas": 0, "bytes": 0.0}
                   for i, b in enumerate(inputs.bookie_ids)
                   if i not in held and b in inputs.topology.writable]
    aggregates.sort(key=lambda a: (a["dim"], a["key"]))
    pq.write_table(pa.Table.from_pylist(aggregates), out / "aggregates.parquet")

    namespaces = []
    for r in sorted(totals.ns_rows, key=lambda r: (r["namespace"] is None, r["namespace"] or "")):
        kinds = totals.ns_kinds.get(r["namespace"], {})
        namespaces.append({
            "namespace": r["namespace"], "ledgers": int(r["ledgers"]),
            "bytes": int(r["bytes"] or 0), "stored_bytes": int(r["stored_bytes"] or 0),
            "fragments": int(per_ns.get(r["namespace"], {}).get("replicas", 0)),
            "violating_fragments": int(per_ns.get(r["namespace"], {})
                                       .get("violating_replicas", 0)),
            **{k.name or "": int(kinds.get(k.name or "") or 0) for k in KINDS}})
    pq.write_table(pa.Table.from_pylist(namespaces), out / "namespaces.parquet")

    ids = inputs.bookie_ids
    id_array = pa.array(ids, pa.string())
    net = np.zeros(len(ids), np.float64)
    touched = np.zeros(len(ids), bool)
    n_planned = n_moves = n_unfixable = 0
    bytes_moved = 0.0
    reasons: Counter[str] = Counter()
    with pq.ParquetWriter(out / "repair_plan.parquet", PLAN_SCHEMA) as plan_writer, \
            pq.ParquetWriter(out / "unfixable.parquet", UNFIXABLE_SCHEMA) as unfixable_writer:
        for part in totals.plan_parts:
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
    summary = AuditSummary(
        snapshot=str(snapshot),
        placement_mode=inputs.config.mode.value,
        fragments=totals.fragments,
        ledgers=sum(n["ledgers"] for n in namespaces),
        violating_fragments=sum(n["violating_fragments"] for n in namespaces),
        violating_ledgers=totals.violating_ledgers,
        violations_by_kind={k: v for k, v in by_kind.items() if v},
        skew={dim: skew([a["bytes"] for a in aggregates if a["dim"] == dim]) for dim in DIMS},
        plan=PlanSummary(moves=n_moves, fragments=n_planned,
                         fixed_fragments=n_planned - n_unfixable,
                         unfixable_fragments=n_unfixable, bytes_moved=bytes_moved,
                         load_added_per_bookie={ids[i]: float(net[i]) for i in top}),
        check_seconds=round(totals.check_seconds, 2),
        seconds=round(seconds, 2),
    )
    document = summary.as_json()
    (out / "summary.json").write_text(json.dumps(document, indent=2) + "\n")
    (out / "report.html").write_text(render_report(document, aggregates, namespaces,
                                                   reasons, inputs))
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
