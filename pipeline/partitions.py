"""The bodies of the audit's `mapInArrow` stages and what they receive as a broadcast.

In a module of their own (never the `__main__` of a command line) so the Python
workers unpickle `Judge` and these functions by name.
"""

from __future__ import annotations

import os
import pickle
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.io import padded
from pipeline.placement_inputs import PlacementInputs
from pipeline.plan import plan_fragment
from pipeline.schema import FRAGMENTS_DENORMALISED
from placement.batch import check_batch

CHECKED = pa.schema([
    ("ledger_id", pa.int64()), ("segment", pa.int32()), ("first_entry_id", pa.int64()),
    ("last_entry_id", pa.int64()), ("namespace", pa.string()), ("state", pa.string()),
    ("ns_index", pa.int32()), ("policy", pa.int32()),
    ("write_quorum", pa.int32()), ("ack_quorum", pa.int32()),
    ("ensemble", pa.list_(pa.int32())), ("bytes", pa.float64()),
    ("adherence", pa.int32()), ("violations", pa.int32()),
])
#: the verdict table: ids and verdicts only (namespace, quorums and ensemble are in the
#: snapshot's `fragments` under the same (ledger_id, segment))
VERDICT_COLUMNS = ["ledger_id", "segment", "first_entry_id", "last_entry_id", "bytes",
                   "adherence", "violations"]
#: rows per Arrow batch a task reads from its files
BATCH_ROWS = 131_072
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

    def __init__(self, cluster: PlacementInputs, ns_names: Sequence[str | None]) -> None:
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
    """What one partition reports besides the files it wrote (its verdicts, its violating
    ledgers' findings and its repair plan, each a part file of the same name): partial
    aggregates and kinds per namespace (bounded by the numbers of bookies, racks, groups
    and namespaces, not by the data) and counts."""

    partial: pa.Table  # PARTIAL
    ns_kinds: pa.Table  # NS_KINDS
    violating_fragments: int
    violating_ledgers: int


#: beside `fragment_verdicts/`: each task's per-ledger findings (an output) and its part of
#: the repair plan (gathered into repair_plan.parquet by the driver, one part at a time)
FINDINGS_DIR = "ledger_findings"
PLAN_PARTS_DIR = ".plan_parts"


@contextmanager
def part_file(directory: str, part: int) -> Iterator[str]:
    """A temporary path to write `directory/part-NNNNN.parquet` to, renamed into place when
    the block ends without an error (so a task that runs again replaces its part whole and a
    failed one leaves none) and removed otherwise."""
    os.makedirs(directory, exist_ok=True)
    temp = os.path.join(directory, f".{part_name(part)}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        yield temp
        os.replace(temp, os.path.join(directory, part_name(part)))
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


#: what each task of the check returns instead of its verdict rows (those it writes
#: itself): the verdict part file it wrote, its row count, and its pickled PartitionResult
TASK_RESULT = pa.schema([("part", pa.int32()), ("file", pa.string()),
                         ("fragments", pa.int64()), ("result", pa.binary())])


def part_name(part: int) -> str:
    return f"part-{part:05d}.parquet"


def judge_to_file(batches: Iterable[pa.RecordBatch], judge: Judge, verdict_dir: str,
                  part: int) -> pa.RecordBatch:
    """Judge every fragment of `batches` (FRAGMENTS_DENORMALISED columns, a ledger's
    fragments all among them), write their verdicts (VERDICTS) to
    `verdict_dir/part-NNNNN.parquet` (a temporary file renamed into place, so a re-run
    task replaces its part whole and a failed one leaves no part), its violating ledgers'
    findings and its repair plan to parts of the same name in FINDINGS_DIR and
    PLAN_PARTS_DIR beside `verdict_dir`, and return the one-row TASK_RESULT: the
    partition's aggregates, kinds per namespace and counts, pickled (so what reaches the
    driver does not grow with the number of violations).
    """
    c = judge.cluster
    seen: list[tuple[Any, ...]] = []
    bad_rows: list[pa.RecordBatch] = []
    rows = 0
    with part_file(verdict_dir, part) as temp, pq.ParquetWriter(temp, VERDICTS) as writer:
        for b in batches:
            if b.num_rows == 0:
                continue
            ns = judge.ns_index(b.column("namespace"))
            policy = judge.policy[ns]
            ens = padded(b.column("ensemble"))
            qw, qa = _np(b, "write_quorum"), _np(b, "ack_quorum")
            verdict, kinds = check_batch(c.batch, c.policies, c.config, ens, qw, qa,
                                         policy)
            first, last = _np(b, "first_entry_id"), _np(b, "last_entry_id")
            entries = _np(b, "ledger_last_entry_id") + 1
            length = _np(b, "ledger_length").astype(np.float64)
            nbytes = np.where(entries > 0,
                              length * (last - first + 1) / np.maximum(entries, 1), 0.0)
            writer.write_batch(pa.RecordBatch.from_arrays(
                [b.column(n) for n in VERDICT_COLUMNS[:4]]
                + [pa.array(nbytes), pa.array(verdict.astype(np.int32)),
                   pa.array(kinds)], schema=VERDICTS))
            rows += b.num_rows
            seen.append((_np(b, "ledger_id"), ns, ens, qw, nbytes, kinds))
            if (kinds != 0).any():
                keep = pa.array(kinds != 0)
                bad = b.filter(keep)
                bad_rows.append(pa.RecordBatch.from_arrays(
                    [bad.column(n) for n in CHECKED.names[:6]]
                    + [pa.array(ns[kinds != 0], pa.int32()),
                       pa.array(policy[kinds != 0], pa.int32())]
                    + [bad.column(n) for n in CHECKED.names[8:11]]
                    + [pa.array(nbytes[kinds != 0]),
                       pa.array(verdict[kinds != 0].astype(np.int32)),
                       pa.array(kinds[kinds != 0])], schema=CHECKED))
    bad_table = pa.Table.from_batches(bad_rows, schema=CHECKED)
    out_dir = os.path.dirname(os.path.abspath(verdict_dir))
    findings = findings_of(bad_table)
    with part_file(os.path.join(out_dir, FINDINGS_DIR), part) as temp:
        pq.write_table(findings.sort_by("ledger_id"), temp)
    with part_file(os.path.join(out_dir, PLAN_PARTS_DIR), part) as temp:
        pq.write_table(plan_rows(c, bad_table), temp)
    result = PartitionResult(aggregate(judge, seen), ns_kinds_of(bad_table),
                             bad_table.num_rows, findings.num_rows)
    return pa.RecordBatch.from_arrays(
        [pa.array([part], pa.int32()), pa.array([part_name(part)]), pa.array([rows], pa.int64()),
         pa.array([pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)], pa.binary())],
        schema=TASK_RESULT)


def read_fragment_files(paths: Sequence[str]) -> Iterator[pa.RecordBatch]:
    """The FRAGMENTS_DENORMALISED columns of the Parquet files `paths`, in batches."""
    for path in paths:
        for b in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS,
                                                   columns=FRAGMENTS_DENORMALISED.names):
            yield b.cast(FRAGMENTS_DENORMALISED)


def audit_files(tasks: Iterator[pa.RecordBatch], judge: Judge, verdict_dir: str
                ) -> Iterator[pa.RecordBatch]:
    """mapInArrow body over rows of TASKS (part number, fragment file paths): the task
    reads its files itself (pyarrow), so the fragments never pass through the JVM."""
    for t in tasks:
        for part, paths in zip(t.column("part").to_pylist(), t.column("paths").to_pylist(),
                               strict=True):
            yield judge_to_file(read_fragment_files(paths), judge, verdict_dir, part)


#: ledgers, their bytes and their bytes x Qw per namespace (null: ledgers with none)
NS_TOTALS = pa.schema([("namespace", pa.string()), ("ledgers", pa.int64()),
                       ("bytes", pa.int64()), ("stored_bytes", pa.int64())])


def namespace_totals(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body over rows of TASKS naming `ledgers` part files: each task reads its
    files' namespace, length and write quorum with pyarrow and yields NS_TOTALS rows."""
    for t in tasks:
        for paths in t.column("paths").to_pylist():
            totals = []
            for path in paths:
                for b in pq.ParquetFile(path).iter_batches(
                        batch_size=BATCH_ROWS, columns=["namespace", "length", "write_quorum"]):
                    length = b.column("length").cast(pa.int64())
                    totals.append(pa.table({
                        "namespace": b.column("namespace").cast(pa.string()),
                        "length": length,
                        "stored": pc.multiply(length, b.column("write_quorum").cast(pa.int64())),
                    }).group_by("namespace", use_threads=False).aggregate(
                        [([], "count_all"), ("length", "sum"), ("stored", "sum")]))
            if not totals:
                continue
            summed = pa.concat_tables(totals).group_by("namespace", use_threads=False).aggregate(
                [("count_all", "sum"), ("length_sum", "sum"), ("stored_sum", "sum")])
            yield pa.RecordBatch.from_arrays(
                [summed.column("namespace").combine_chunks(),
                 *(summed.column(c).combine_chunks().cast(pa.int64()) for c in
                   ("count_all_sum", "length_sum_sum", "stored_sum_sum"))], schema=NS_TOTALS)


def audit_partition(batches: Iterator[pa.RecordBatch], judge: Judge, verdict_dir: str
                    ) -> Iterator[pa.RecordBatch]:
    """mapInArrow body over fragments already joined to their ledgers and partitioned by
    ledger id (snapshots without the ledger columns in `fragments`): judges them, writes
    the partition's verdict part and yields its TASK_RESULT row."""
    from pyspark import TaskContext

    task = TaskContext.get()
    yield judge_to_file(batches, judge, verdict_dir, task.partitionId() if task else 0)


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
    rank_f = ledger_rank(lid_f)
    bad_f = np.concatenate(kinds_all) != 0
    valid = ens >= 0
    size = np.maximum(valid.sum(axis=1), 1)
    share = np.concatenate(bytes_all) * np.concatenate(qw_all) / size
    rows = np.nonzero(valid)[0]
    lid_m, bk, share_m, bad_m = rank_f[rows], ens[valid], share[rows], bad_f[rows]
    out = []
    for dim, key, lid_all, bad_all, share_all in (
            ("bookie", bk, lid_m, bad_m, share_m),
            ("rack", topology.rack[bk], lid_m, bad_m, share_m),
            ("region", topology.region[bk], lid_m, bad_m, share_m),
            ("group", topology.group[bk], lid_m, bad_m, share_m),
            ("namespace", ns_f, rank_f, bad_f, share * size)):
        k = key.astype(np.int64) + 1  # group -1 (none) -> 0
        width = int(k.max()) + 1 if len(k) else 1
        n_ledgers = ledgers_per_key(lid_all, k, width)
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


def ledger_rank(lid: Any) -> Any:
    """Each row's ledger as a dense index 0..n-1 (ledgers in order of id)."""
    if len(lid) == 0 or bool((lid[1:] >= lid[:-1]).all()):  # read from ledger-sorted files
        return np.concatenate([[0], np.cumsum(lid[1:] != lid[:-1])]).astype(np.int64)
    return np.unique(lid, return_inverse=True)[1].astype(np.int64)


#: cells of the (ledger, key) bitmap `ledgers_per_key` marks at once
BITMAP_CELLS = 1 << 23


def ledgers_per_key(rank: Any, key: Any, width: int) -> Any:
    """How many distinct ledgers (dense `rank`) have a row with each key 0..width-1: a
    bitmap of (ledger, key) cells, a slice of ledgers at a time (no sort)."""
    out = np.zeros(width, np.int64)
    if len(rank) == 0:
        return out
    order = None if bool((rank[1:] >= rank[:-1]).all()) else np.argsort(rank, kind="stable")
    rank_s = rank if order is None else rank[order]
    key_s = key if order is None else key[order]
    step = max(1, BITMAP_CELLS // width)
    last = int(rank_s[-1])
    for lo in range(0, last + 1, step):
        a, b = np.searchsorted(rank_s, [lo, lo + step])
        if a == b:
            continue
        cells = np.zeros(step * width, bool)
        cells[(rank_s[a:b] - lo) * width + key_s[a:b]] = True
        out += np.bincount(np.flatnonzero(cells) % width, minlength=width)
    return out


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


def plan_rows(cluster: PlacementInputs, bad: pa.Table) -> pa.Table:
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
