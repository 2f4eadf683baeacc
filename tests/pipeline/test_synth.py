"""The synthetic snapshot's ground truth is what the scalar check finds, fragment by fragment."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from pipeline.plain import plain_audit
from pipeline.schema import FRAGMENTS_DENORMALISED, TABLES, check_snapshot
from pipeline.synth import KINDS, SynthSpec, generate


def test_ground_truth_is_what_the_scalar_check_finds(tmp_path: Path) -> None:
    spec = SynthSpec(ledgers=800, bookies=120, racks=6, groups=3, seed=5, degraded=True,
                     rates=dict.fromkeys(KINDS, 0.02))
    counts = generate(spec, tmp_path)
    truth = {(r["ledger_id"], r["segment"]): r["violations"]
             for r in pq.read_table(tmp_path / "ground_truth").to_pylist()}
    assert len(truth) == counts["violating_fragments"] > 0
    assert plain_audit(tmp_path) == truth
    kinds = {v for v in truth.values()}
    assert len(kinds) >= 6  # every fault kind was injected


def test_tables_match_the_documented_schema(tmp_path: Path) -> None:
    generate(SynthSpec(ledgers=50, bookies=120, racks=6, groups=3), tmp_path)
    paths = check_snapshot(tmp_path)
    for name, schema in TABLES.items():
        want = FRAGMENTS_DENORMALISED if name == "fragments" else schema
        assert pq.read_table(paths[name]).schema.equals(want, check_metadata=False), name
