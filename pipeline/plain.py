"""The plain single-process audit: read the same Parquet, call the scalar check per fragment.

The baseline the Spark audit is measured against (bench/audit_bench.py), and a second,
independent path the tests compare the Spark verdicts with. No Spark, no numpy batch.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

from pipeline.placement_inputs import PlacementInputs, build_placement_inputs
from pipeline.schema import TABLES, check_snapshot, read_table
from placement.violations import check_fragment


def load_placement_inputs(snapshot: Path) -> PlacementInputs:
    paths = check_snapshot(snapshot)
    return build_placement_inputs(*(read_table(paths[t], TABLES[t]) for t in ("bookies", "policies",
                                                                     "config")))


def plain_audit(snapshot: Path) -> dict[tuple[int, int], int]:
    """{(ledger_id, segment): violation bits} of every violating fragment."""
    paths = check_snapshot(snapshot)
    cluster = load_placement_inputs(snapshot)
    ledgers = ds.dataset(paths["ledgers"], format="parquet").to_table(
        columns=["ledger_id", "namespace", "write_quorum", "ack_quorum"])
    index = cluster.policy_index()
    quorum = {
        lid: (w, a, index.get(ns, cluster.default_policy))
        for lid, ns, w, a in zip(*(ledgers.column(c).to_pylist() for c in ledgers.column_names),
                                 strict=True)
    }
    ids = cluster.bookie_ids
    topology, config = cluster.topology, cluster.config
    found: dict[tuple[int, int], int] = {}
    frags = ds.dataset(paths["fragments"], format="parquet")
    for batch in frags.to_batches(columns=["ledger_id", "segment", "ensemble"]):
        table = pa.Table.from_batches([batch])
        for lid, seg, ens in zip(*(table.column(c).to_pylist() for c in table.column_names),
                                 strict=True):
            w, a, policy = quorum[lid]
            verdict = check_fragment(topology, [ids[b] for b in ens], w, a, config,
                                     affinity=cluster.affinities[policy])
            if verdict.violations:
                found[(lid, seg)] = int(verdict.violations)
    return found
