"""A realistic snapshot at any size, with known violations (`generate`; `python -m pipeline
synth` runs it).

Cluster layout (rack-aware, `R` racks `/rack-NN`, `G` groups `group-N`): every (rack,
group) cell holds the same number of bookies; in each cell one is read-only and one no
longer registered; each group has one bookie without a rack (default rack), and a few
bookies are in no group. Namespaces cycle through four policies: none (broker
defaults: no isolation), a primary group, primary+secondary strict, primary strict.

Clean fragments put each member on a different rack, inside the namespace's primary
group (any group without isolation), on writable bookies. Then a disjoint random share
of the eligible fragments gets one fault each, built so that it causes exactly the kinds
recorded in `ground_truth` (a same-rack swap keeps rack spread intact):

    too-few-racks   the first write quorum moved onto one rack
    foreign-group   a member swapped for a same-rack bookie of a group not allowed
    ungrouped       (strict namespaces) a member swapped for an ungrouped bookie; under
                    enforce that is also a default-rack bookie, and recorded so
    default-rack    (enforce only) a member swapped for its group's rackless bookie
    not-registered  a member swapped for its cell's unregistered bookie
    read-only       a member swapped for its cell's read-only bookie

Everything is numpy over whole columns: 1M ledgers (about 3M fragments) take seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.schema import FRAGMENTS_DENORMALISED, LEDGER_COLUMNS, TABLES
from placement.violations import Violation

SHAPES = np.array([(2, 2, 2), (3, 3, 2), (3, 2, 2), (5, 3, 2)], np.int32)
SHAPE_WEIGHTS = np.array([0.35, 0.35, 0.15, 0.15])
TRUTH_SCHEMA = pa.schema([("ledger_id", pa.int64()), ("segment", pa.int32()),
                          ("violations", pa.int32())])
KINDS = ("too_few_racks", "foreign_group", "ungrouped", "default_rack", "not_registered",
         "read_only")
ROWS_PER_FILE = 500_000
CHUNK_LEDGERS = 1_000_000
I32 = npt.NDArray[np.int32]


@dataclass(frozen=True)
class SynthSpec:
    ledgers: int
    bookies: int
    racks: int
    groups: int
    seed: int = 0
    namespaces: int = 12
    enforce: bool = True
    degraded: bool = False  # group-0 read-only outside rack-00: faults a plan cannot fix
    rates: dict[str, float] = field(default_factory=lambda: dict.fromkeys(KINDS, 0.002))


@dataclass(frozen=True)
class Layout:
    per_cell: int
    cell_base: I32  # [R, G] first bookie index of the cell
    default_rack: I32  # [G] the rackless bookie of each group
    ungrouped: I32  # bookie indexes in no group


def layout(spec: SynthSpec) -> Layout:
    r, g = spec.racks, spec.groups
    if r < 2 or g < 1:
        raise ValueError("need at least 2 racks and 1 group")
    per_cell = (spec.bookies - g - 2) // (r * g)
    if per_cell < 6:
        raise ValueError(f"{spec.bookies} bookies are too few for {r} racks x {g} groups "
                         f"(need {6 * r * g + g + 2})")
    cell_base = (np.arange(r * g, dtype=np.int32) * per_cell).reshape(r, g)
    first_extra = r * g * per_cell
    default_rack = np.arange(first_extra, first_extra + g, dtype=np.int32)
    ungrouped = np.arange(first_extra + g, spec.bookies, dtype=np.int32)
    return Layout(per_cell, cell_base, default_rack, ungrouped)


def bookies_table(spec: SynthSpec, lay: Layout, rng: np.random.Generator) -> pa.Table:
    n = spec.bookies
    rack: list[str | None] = [None] * n
    group: list[str | None] = [None] * n
    registered = np.ones(n, np.bool_)
    read_only = np.zeros(n, np.bool_)
    for ri in range(spec.racks):
        for gi in range(spec.groups):
            base = int(lay.cell_base[ri, gi])
            for k in range(lay.per_cell):
                rack[base + k] = f"/rack-{ri:02d}"
                group[base + k] = f"group-{gi}"
            read_only[base] = True
            registered[base + 1] = False
    for gi, b in enumerate(lay.default_rack.tolist()):
        group[b] = f"group-{gi}"
    read_only |= degraded_bookies(spec, lay) & registered
    capacity = np.full(n, 4 << 40, np.int64)
    return pa.table({
        "bookie_index": np.arange(n, dtype=np.int32),
        "bookie_id": [f"bookie-{i:05d}.example:3181" for i in range(n)],
        "registered": registered,
        "read_only": read_only,
        "rack": rack,
        "region": ["UnknownRegion"] * n,
        "group": group,
        "hostname": [f"bookie-{i:05d}.example" for i in range(n)],
        "disk_used": (capacity * rng.uniform(0.1, 0.8, n)).astype(np.int64),
        "disk_capacity": capacity,
    }, schema=TABLES["bookies"])


def degraded_bookies(spec: SynthSpec, lay: Layout) -> npt.NDArray[np.bool_]:
    """With `spec.degraded`: every bookie of group-0 outside rack-00 (read-only once)."""
    mask = np.zeros(spec.bookies, np.bool_)
    if spec.degraded:
        for ri in range(1, spec.racks):
            base = int(lay.cell_base[ri, 0])
            mask[base:base + lay.per_cell] = True
    return mask


def policy_kind(ns: int) -> int:
    """0 none, 1 primary, 2 primary+secondary strict, 3 primary strict."""
    return ns % 4


def policies_table(spec: SynthSpec) -> pa.Table:
    rows: list[dict[str, Any]] = []
    for ns in range(spec.namespaces):
        kind, g = policy_kind(ns), int(primary_group(np.array([ns], np.int32), spec.groups)[0])
        if kind == 0:  # no groups of its own: the broker defaults apply
            rows.append({"namespace": namespace_name(ns), "primary_groups": None,
                         "secondary_groups": None, "strict": None, "ensemble_size": None,
                         "write_quorum": None, "ack_quorum": None})
            continue
        secondary = [f"group-{(g + 1) % spec.groups}"] if kind == 2 and spec.groups > 1 else []
        rows.append({"namespace": namespace_name(ns), "primary_groups": [f"group-{g}"],
                     "secondary_groups": secondary, "strict": kind >= 2,
                     "ensemble_size": None, "write_quorum": None, "ack_quorum": None})
    return pa.Table.from_pylist(rows, schema=TABLES["policies"])


def primary_group(ns: I32, groups: int) -> I32:
    """A namespace's primary group index (spread over every group whatever its kind)."""
    return (ns + ns // 4) % groups


def namespace_name(ns: int) -> str:
    return f"tenant-{ns % 3}/ns-{ns:03d}"


def config_table(spec: SynthSpec) -> pa.Table:
    return pa.Table.from_pylist([{
        "placement_mode": "rack-aware", "min_racks": 2, "enforce_min_racks": spec.enforce,
        "strict_bookie_affinity": False, "isolation_groups": [],
        "secondary_isolation_groups": [], "regions_to_write": [], "min_regions": 2,
    }], schema=TABLES["config"])


def generate(spec: SynthSpec, out: Path) -> dict[str, float]:
    """Write the snapshot and `ground_truth` under `out`; counts of what was made.

    Made CHUNK_LEDGERS ledgers at a time (each chunk its own random stream, its own part
    files), so the generator's memory stays flat in N.
    """
    lay = layout(spec)
    out.mkdir(parents=True, exist_ok=True)
    parts = {name: 0 for name in ("ledgers", "fragments", "ground_truth")}
    fragments = violating = 0
    for first in range(0, max(spec.ledgers, 1), CHUNK_LEDGERS):
        chunk = first // CHUNK_LEDGERS
        rng = np.random.default_rng(spec.seed if chunk == 0 else [spec.seed, chunk])
        tables = _chunk(spec, lay, rng, first, min(CHUNK_LEDGERS, spec.ledgers - first))
        for name, table in tables.items():
            parts[name] = write_table(out / name, table, first_part=parts[name],
                                      together="ledger_id" if name == "fragments" else None)
        fragments += tables["fragments"].num_rows
        violating += tables["ground_truth"].num_rows
    disk_rng = np.random.default_rng([spec.seed, 1 << 30])
    write_table(out / "bookies", bookies_table(spec, lay, disk_rng))
    write_table(out / "policies", policies_table(spec))
    write_table(out / "config", config_table(spec))
    return {"ledgers": spec.ledgers, "fragments": fragments, "bookies": spec.bookies,
            "violating_fragments": violating}


def _chunk(spec: SynthSpec, lay: Layout, rng: np.random.Generator, first_ledger: int,
           n: int) -> dict[str, pa.Table]:
    """The ledgers first_ledger .. first_ledger + n - 1, their fragments and ground truth."""
    r, g = spec.racks, spec.groups
    shapes_ok = SHAPES[:, 0] <= r
    weights = SHAPE_WEIGHTS * shapes_ok
    ledger_ns = rng.integers(0, spec.namespaces, n, dtype=np.int32)
    shape = SHAPES[rng.choice(len(SHAPES), n, p=weights / weights.sum())]
    per_ledger = np.minimum(1 + rng.poisson(2.0, n), 8).astype(np.int32)
    entries = rng.integers(100, 20_000, n, dtype=np.int64)
    entry_bytes = rng.integers(200, 4_000, n, dtype=np.int64)
    state = np.where(rng.random(n) < 0.1, "OPEN", "CLOSED")
    ledger_ids = np.arange(n, dtype=np.int64) + 1_000 + first_ledger

    # fragments
    f = int(per_ledger.sum())
    owner = np.repeat(np.arange(n), per_ledger)
    starts = np.concatenate([[0], np.cumsum(per_ledger)[:-1]])
    segment = (np.arange(f) - np.repeat(starts, per_ledger)).astype(np.int32)
    cut = np.sort(rng.random(f))  # entry boundaries: equal shares, jittered
    share = (segment + np.where(segment > 0, cut * 0.5, 0)) / np.repeat(per_ledger, per_ledger)
    first = (share * np.repeat(entries, per_ledger)).astype(np.int64)
    first[np.repeat(starts, per_ledger) == np.arange(f)] = 0
    last = np.empty(f, np.int64)
    last[:-1] = first[1:] - 1
    last[np.cumsum(per_ledger) - 1] = entries - 1
    e_of = shape[owner, 0]
    qw_of = shape[owner, 1]
    ns_of = ledger_ns[owner]
    kind_of_ns = np.arange(spec.namespaces) % 4  # policy_kind of each namespace
    isolated = kind_of_ns[ns_of] > 0
    strict = kind_of_ns[ns_of] >= 2
    primary = primary_group(ns_of, g).astype(np.int32)

    emax = int(SHAPES[shapes_ok, 0].max())
    racks = np.argsort(rng.random((f, r)), axis=1)[:, :emax].astype(np.int32)
    groups = np.where(isolated[:, None], primary[:, None],
                      rng.integers(0, g, (f, emax), dtype=np.int32)).astype(np.int32)
    k = rng.integers(2, lay.per_cell, (f, emax), dtype=np.int32)
    ens = lay.cell_base[racks, groups] + k
    col = np.arange(emax)
    ens[col[None, :] >= e_of[:, None]] = -1
    truth = np.zeros(f, np.int32)

    order = rng.permutation(f)
    taken = np.zeros(f, np.bool_)
    pos = (rng.random(f) * e_of).astype(np.int32)  # the member a fault swaps
    rows = np.arange(f)
    r_pos, g_pos = racks[rows, pos], groups[rows, pos]

    def pick(kind: str, eligible: npt.NDArray[np.bool_]) -> npt.NDArray[np.intp]:
        want = round(spec.rates.get(kind, 0.0) * f)
        cand = order[eligible[order] & ~taken[order]][:want]
        taken[cand] = True
        return cand

    # too few racks: members 0..Qw-1 all on member 0's rack (distinct k within a cell)
    sel = pick("too_few_racks", qw_of >= 2)
    for j in range(1, int(qw_of.max())):
        s = sel[qw_of[sel] > j]
        kk = 2 + (k[s, 0] - 2 + j) % (lay.per_cell - 2)
        ens[s, j] = lay.cell_base[racks[s, 0], groups[s, j]] + kk
    truth[sel] |= Violation.TOO_FEW_RACKS
    # foreign group: same rack, a group the namespace may not use
    foreign = np.where(kind_of_ns[ns_of] == 2, (primary + 2) % g, (primary + 1) % g)
    has_foreign = isolated & ((kind_of_ns[ns_of] != 2) | (g >= 3)) & (g >= 2)
    sel = pick("foreign_group", has_foreign)
    ens[sel, pos[sel]] = lay.cell_base[r_pos[sel], foreign[sel]] + k[sel, pos[sel]]
    truth[sel] |= Violation.FOREIGN_GROUP
    # ungrouped under strict
    sel = pick("ungrouped", strict & (len(lay.ungrouped) > 0))
    if len(lay.ungrouped):
        ens[sel, pos[sel]] = rng.choice(lay.ungrouped, len(sel))
    truth[sel] |= Violation.UNGROUPED_UNDER_STRICT
    if spec.enforce:
        truth[sel] |= Violation.DEFAULT_RACK_UNDER_ENFORCE
    # default rack under enforce
    sel = pick("default_rack", np.full(f, spec.enforce))
    ens[sel, pos[sel]] = lay.default_rack[g_pos[sel]]
    truth[sel] |= Violation.DEFAULT_RACK_UNDER_ENFORCE
    # not registered / read-only: the cell's bookies 1 and 0
    for kind, offset, bit in (("not_registered", 1, Violation.NOT_REGISTERED),
                              ("read_only", 0, Violation.READ_ONLY)):
        sel = pick(kind, np.ones(f, np.bool_))
        ens[sel, pos[sel]] = lay.cell_base[r_pos[sel], g_pos[sel]] + offset
        truth[sel] |= bit

    if spec.degraded:  # the cell's unregistered bookie (offset 1) stays unregistered
        gone = np.zeros(spec.bookies, np.bool_)
        gone[(lay.cell_base + 1).reshape(-1)] = True
        hit = (degraded_bookies(spec, lay) & ~gone)[np.maximum(ens, 0)] & (ens >= 0)
        truth[hit.any(axis=1)] |= Violation.READ_ONLY
    ns_names = np.array([namespace_name(i) for i in range(spec.namespaces)], dtype=object)
    tenants = np.array([namespace_name(i).split("/")[0] for i in range(spec.namespaces)],
                       dtype=object)
    topic_no = rng.integers(0, 50, n)
    ledgers_tbl = pa.table({
        "ledger_id": ledger_ids,
        "tenant": pa.array(tenants[ledger_ns], pa.string()),
        "namespace": pa.array(ns_names[ledger_ns], pa.string()),
        "topic": pa.array(np.char.add(np.char.add(
            ("persistent://" + ns_names[ledger_ns]).astype(str), "/topic-"),
            topic_no.astype(str)), pa.string()),
        "state": pa.array(state, pa.string()),
        "ensemble_size": shape[:, 0],
        "write_quorum": shape[:, 1],
        "ack_quorum": shape[:, 2],
        "length": entries * entry_bytes,
        "last_entry_id": entries - 1,
        "placement_policy": pa.nulls(n, pa.string()),
    }, schema=TABLES["ledgers"])
    lengths = e_of.astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = ens[col[None, :] < e_of[:, None]].astype(np.int32)
    fragments_tbl = pa.table({
        "ledger_id": ledger_ids[owner],
        "segment": segment,
        "first_entry_id": first,
        "last_entry_id": last,
        "ensemble": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values)),
        **{c.name: ledgers_tbl.column(c.name.removeprefix("ledger_")).take(owner)
           for c in LEDGER_COLUMNS},
    }, schema=FRAGMENTS_DENORMALISED)
    bad = truth != 0
    truth_tbl = pa.table({"ledger_id": ledger_ids[owner][bad], "segment": segment[bad],
                          "violations": truth[bad]}, schema=TRUTH_SCHEMA)
    return {"ledgers": ledgers_tbl, "fragments": fragments_tbl, "ground_truth": truth_tbl}


def write_table(directory: Path, table: pa.Table, *, together: str | None = None,
                first_part: int = 0, rows_per_file: int = ROWS_PER_FILE) -> int:
    """`table` as part files of about `rows_per_file` rows (one Spark task each); the
    number of the next part. `first_part` 0 clears the directory's old parts first.

    With `together` (a column the table is grouped by), rows sharing its value stay in one
    file: a file ends only where the value changes (the audit reads files whole).
    """
    directory.mkdir(parents=True, exist_ok=True)
    if first_part == 0:
        for old in directory.glob("part-*.parquet"):
            old.unlink()
    n = table.num_rows
    cuts = list(range(rows_per_file, n, rows_per_file))
    if together is not None and cuts:
        keys = table.column(together).to_numpy()
        bounds = np.flatnonzero(keys[1:] != keys[:-1]) + 1
        at = np.searchsorted(bounds, cuts)
        cuts = sorted({int(bounds[i]) for i in at if i < len(bounds)})
    starts = [0, *cuts]
    ends = [*cuts, max(n, 1)]
    for i, (start, end) in enumerate(zip(starts, ends, strict=True)):
        pq.write_table(table.slice(start, end - start),
                       directory / f"part-{first_part + i:05d}.parquet")
    return first_part + len(starts)
