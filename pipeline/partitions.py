"""The bodies of the audit's `mapInArrow` stages and what they receive as a broadcast.

In a module of their own (not `pipeline.audit`, which runs as `__main__`) so the Python
workers unpickle `Judge` and these functions by name.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.accumulators import AccumulatorParam

from pipeline.cluster import Cluster
from pipeline.io import padded
from pipeline.plan import plan_fragment
from placement.batch import check_batch

CHECKED = pa.schema([
    ("ledger_id", pa.int64()), ("segment", pa.int32()), ("first_entry_id", pa.int64()),
    ("last_entry_id", pa.int64()), ("namespace", pa.string()), ("state", pa.string()),
    ("ns_index", pa.int32()), ("policy", pa.int32()),
    ("write_quorum", pa.int32()), ("ack_quorum", pa.int32()),
    ("ensemble", pa.list_(pa.int32())), ("bytes", pa.float64()),
    ("adherence", pa.int32()), ("violations", pa.int32()),
])
VERDICT_COLUMNS = [c for c in CHECKED.names if c not in ("state", "ns_index", "policy")]
PARTIAL = pa.schema([("dim", pa.string()), ("key", pa.int32()), ("ledgers", pa.int64()),
                     ("replicas", pa.int64()), ("violating_replicas", pa.int64()),
                     ("bytes", pa.float64())])
#: one row per violating fragment (position -1: violations, remaining, reason) and one per
#: move (position >= 0: bookie out and in, bytes)
PLANNED = pa.schema([("ledger_id", pa.int64()), ("segment", pa.int32()),
                     ("position", pa.int32()), ("bookie_out_index", pa.int32()),
                     ("bookie_in_index", pa.int32()), ("bytes", pa.float64()),
                     ("violations", pa.int32()), ("remaining", pa.int32()),
                     ("reason", pa.string())])


class Judge:
    """What every executor needs, broadcast once: the cluster and the namespace index."""

    def __init__(self, cluster: Cluster, ns_names: Sequence[str | None]) -> None:
        self.cluster = cluster
        self.named = pa.array([n for n in ns_names if n is not None], pa.string())
        policy = cluster.policy_index()
        #: ns_index -> policy index; the last ns_index is "no namespace" when present
        self.policy = np.array([policy.get(n, cluster.default_policy) if n is not None
                                else cluster.default_policy for n in ns_names]
                               + [cluster.default_policy], np.int32)

    def ns_index(self, namespace: pa.Array) -> Any:
        found = pc.index_in(namespace, value_set=self.named)
        return pc.fill_null(found, len(self.named)).to_numpy(zero_copy_only=False).astype(
            np.int32)


def _np(b: pa.RecordBatch, name: str) -> Any:
    return b.column(name).to_numpy(zero_copy_only=False)


VERDICTS = pa.schema([CHECKED.field(c) for c in VERDICT_COLUMNS])
NS_KINDS = pa.schema([("ns_index", pa.int32()), ("kind", pa.int32()), ("fragments", pa.int64())])
FINDINGS = pa.schema([("ledger_id", pa.int64()), ("namespace", pa.string()),
                      ("state", pa.string()), ("violations", pa.int32()),
                      ("violating_fragments", pa.int64()), ("violating_bytes", pa.float64())])


@dataclass(frozen=True)
class PartitionResult:
    """What one partition reports besides its verdict rows: partial aggregates, the
    violating fragments' per-ledger findings, kinds per namespace and repair plan."""

    partial: pa.Table  # PARTIAL
    findings: pa.Table  # FINDINGS
    ns_kinds: pa.Table  # NS_KINDS
    planned: pa.Table  # PLANNED


class ByPartition(AccumulatorParam[dict[int, PartitionResult]]):
    """Accumulator of {partition id: result}: a re-run task replaces its partition's
    result instead of adding it twice, so the totals stay exact."""

    def zero(self, value: dict[int, PartitionResult]) -> dict[int, PartitionResult]:
        return {}

    def addInPlace(self, value1: dict[int, PartitionResult],
                   value2: dict[int, PartitionResult]) -> dict[int, PartitionResult]:
        value1.update(value2)
        return value1


def audit_partition(batches: Iterator[pa.RecordBatch], judge: Judge, results: Any
                    ) -> Iterator[pa.RecordBatch]:
    """mapInArrow body, one pass over a partition of fragments with their ledger's
    columns (FRAGMENTS_DENORMALISED): yields the verdict of every fragment (VERDICTS);
    when the partition is done, adds its `PartitionResult` to the `results` accumulator.

    A ledger's fragments all lie in one partition (the audit reads ledger-aligned files
    whole, or repartitions by ledger id), so per-ledger counts and findings are complete.
    """
    from pyspark import TaskContext

    c = judge.cluster
    seen: list[tuple[Any, ...]] = []
    bad_rows: list[pa.RecordBatch] = []
    for b in batches:
        ns = judge.ns_index(b.column("namespace"))
        policy = judge.policy[ns]
        ens = padded(b.column("ensemble"))
        qw, qa = _np(b, "write_quorum"), _np(b, "ack_quorum")
        verdict, kinds = check_batch(c.batch, c.policies, c.config, ens, qw, qa, policy)
        first, last = _np(b, "first_entry_id"), _np(b, "last_entry_id")
        entries = _np(b, "ledger_last_entry_id") + 1
        length = _np(b, "ledger_length").astype(np.float64)
        nbytes = np.where(entries > 0, length * (last - first + 1) / np.maximum(entries, 1), 0.0)
        checked = pa.RecordBatch.from_arrays(
            [b.column(n) for n in CHECKED.names[:6]]
            + [pa.array(ns, pa.int32()), pa.array(policy, pa.int32())]
            + [b.column(n) for n in CHECKED.names[8:11]]
            + [pa.array(nbytes), pa.array(verdict.astype(np.int32)), pa.array(kinds)],
            schema=CHECKED)
        yield checked.select(VERDICT_COLUMNS)
        seen.append((_np(b, "ledger_id"), ns, ens, qw, nbytes, kinds))
        if (kinds != 0).any():
            bad_rows.append(checked.filter(pa.array(kinds != 0)))
    partial = aggregate(judge, seen)
    bad = pa.Table.from_batches(bad_rows, schema=CHECKED)
    task = TaskContext.get()
    results.add({task.partitionId() if task is not None else 0: PartitionResult(
        partial, findings_of(bad), ns_kinds_of(bad), plan_rows(c, bad))})


def aggregate(judge: Judge, seen: Sequence[tuple[Any, ...]]) -> pa.Table:
    """Ledgers, replicas, violating replicas and bytes per bookie, rack, region, group
    (replicas: a fragment's bytes x Qw / E on each member) and namespace (fragments and
    their stored bytes) of one partition (PARTIAL rows)."""
    topology = judge.cluster.batch
    if not seen:
        return PARTIAL.empty_table()
    lids, ns_all, ens_all, qw_all, bytes_all, kinds_all = zip(*seen, strict=True)
    width_e = max(e.shape[1] for e in ens_all)
    ens = np.concatenate([np.pad(e, ((0, 0), (0, width_e - e.shape[1])), constant_values=-1)
                          for e in ens_all])
    lid_f, ns_f = np.concatenate(lids), np.concatenate(ns_all)
    bad_f = np.concatenate(kinds_all) != 0
    valid = ens >= 0
    size = np.maximum(valid.sum(axis=1), 1)
    share = np.concatenate(bytes_all) * np.concatenate(qw_all) / size
    rows = np.nonzero(valid)[0]
    lid_m, bk, share_m, bad_m = lid_f[rows], ens[valid], share[rows], bad_f[rows]
    out = []
    for dim, key, lid_all, bad_all, share_all in (
            ("bookie", bk, lid_m, bad_m, share_m),
            ("rack", topology.rack[bk], lid_m, bad_m, share_m),
            ("region", topology.region[bk], lid_m, bad_m, share_m),
            ("group", topology.group[bk], lid_m, bad_m, share_m),
            ("namespace", ns_f, lid_f, bad_f, share * size)):
        k = key.astype(np.int64) + 1  # group -1 (none) -> 0
        width = int(k.max()) + 1 if len(k) else 1
        pairs = np.unique(lid_all * width + k)
        n_ledgers = np.bincount(pairs % width, minlength=width)
        replicas = np.bincount(k, minlength=width)
        violating = np.bincount(k, weights=bad_all, minlength=width)
        nbytes = np.bincount(k, weights=share_all, minlength=width)
        present = np.flatnonzero(replicas)
        out.append(pa.table([
            pa.array([dim] * len(present), pa.string()),
            pa.array((present - 1).astype(np.int32)),
            pa.array(n_ledgers[present].astype(np.int64)),
            pa.array(replicas[present].astype(np.int64)),
            pa.array(violating[present].astype(np.int64)), pa.array(nbytes[present])],
            schema=PARTIAL))
    return pa.concat_tables(out)


def findings_of(bad: pa.Table) -> pa.Table:
    """Per violating ledger: OR of its fragments' kinds, how many and their bytes."""
    if bad.num_rows == 0:
        return FINDINGS.empty_table()
    g = bad.group_by(["ledger_id", "namespace", "state"], use_threads=False).aggregate(
        [("violations", "list"), ("violations", "count"), ("bytes", "sum")])
    ors = [int(np.bitwise_or.reduce(np.asarray(v, np.int32)))
           for v in g.column("violations_list").to_pylist()]
    return pa.table([g.column("ledger_id"), g.column("namespace"), g.column("state"),
                     pa.array(ors, pa.int32()),
                     g.column("violations_count").cast(pa.int64()),
                     g.column("bytes_sum")], schema=FINDINGS)


def ns_kinds_of(bad: pa.Table) -> pa.Table:
    """Violating fragments per namespace index and kind bit."""
    ns = bad.column("ns_index").to_numpy()
    kinds = bad.column("violations").to_numpy()
    rows = [(int(n), int(bit), int(((kinds & bit) != 0)[ns == n].sum()))
            for n in np.unique(ns) for bit in (1 << np.arange(16))]
    rows = [r for r in rows if r[2]]
    return pa.Table.from_pylist([dict(zip(NS_KINDS.names, r, strict=True)) for r in rows],
                                schema=NS_KINDS)


def plan_rows(cluster: Cluster, bad: pa.Table) -> pa.Table:
    """The repair plan of each violating fragment (PLANNED rows)."""
    rows: list[tuple[Any, ...]] = []
    for lid, seg, ens, qw, qa, pol, nbytes, viol in zip(*(
            bad.column(n).to_pylist() for n in ("ledger_id", "segment", "ensemble",
                                                "write_quorum", "ack_quorum", "policy",
                                                "bytes", "violations")), strict=True):
        plan = plan_fragment(cluster, lid, seg, ens, write_quorum=qw, ack_quorum=qa,
                             policy=pol, nbytes=nbytes)
        rows.append((lid, seg, -1, -1, -1, 0.0, viol, int(plan.remaining), plan.reason))
        rows += [(lid, seg, m.position, m.bookie_out, m.bookie_in, m.bytes, viol, 0, None)
                 for m in plan.moves]
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(PLANNED)
    return pa.table([pa.array(list(col), f.type) for col, f in zip(columns, PLANNED,
                                                                  strict=True)],
                    schema=PLANNED)
