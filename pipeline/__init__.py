"""The placement audit at cluster scale, on Spark (PySpark), and the snapshots it reads.

    sources.py           where a snapshot reads from: etcd or ZooKeeper by path, bookies' disks
    snapshot.py          a cluster's metadata as the five Parquet tables (`snapshot.snapshot`)
    synth.py             a synthetic snapshot at any size, with known violations (`generate`)
    schema.py            the tables' schemas and checks; io.py: Spark session and Arrow I/O
    placement_inputs.py  the small tables turned into what placement/ reads (`PlacementInputs`)
    partitions.py        the per-task work: judge fragments, aggregate, plan repairs (plan.py)
    audit.py             the audit's stages on Spark (`run_audit`)
    outputs.py           Parquet outputs, summary.json (`AuditSummary`) and report.html (report.py)
    plain.py             the same judgement in plain Python (the benchmark's baseline)
    cli.py               `python -m pipeline snapshot|audit|synth`

Nothing else in the project imports it (import-linter holds that); the names below are its
surface for scripts and the benchmarks, imported on first use (PEP 562), so importing the
package loads neither pyarrow nor Spark.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.audit import run_audit
    from pipeline.cli import main
    from pipeline.outputs import AuditSummary, PlanSummary
    from pipeline.placement_inputs import PlacementInputs, build_placement_inputs
    from pipeline.schema import SnapshotError, check_snapshot
    from pipeline.sources import EtcdSource, SnapshotSourceError, ZkSource, open_source
    from pipeline.synth import SynthSpec, generate

_HOME = {
    "AuditSummary": "pipeline.outputs",
    "EtcdSource": "pipeline.sources",
    "PlacementInputs": "pipeline.placement_inputs",
    "PlanSummary": "pipeline.outputs",
    "SnapshotError": "pipeline.schema",
    "SnapshotSourceError": "pipeline.sources",
    "SynthSpec": "pipeline.synth",
    "ZkSource": "pipeline.sources",
    "build_placement_inputs": "pipeline.placement_inputs",
    "check_snapshot": "pipeline.schema",
    "generate": "pipeline.synth",
    "main": "pipeline.cli",
    "open_source": "pipeline.sources",
    "run_audit": "pipeline.audit",
}

__all__ = [
    "AuditSummary",
    "EtcdSource",
    "PlacementInputs",
    "PlanSummary",
    "SnapshotError",
    "SnapshotSourceError",
    "SynthSpec",
    "ZkSource",
    "build_placement_inputs",
    "check_snapshot",
    "generate",
    "main",
    "open_source",
    "run_audit",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
