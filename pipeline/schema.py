"""The Parquet snapshot the audit reads: five tables, their columns, and the check of both.

A snapshot is a directory with one sub-directory (or `<table>.parquet` file) per table.
Bookies are small integers everywhere (`bookies.bookie_index`), so fragments carry their
ensembles as `list<int32>` and the bulk check vectorises (storage-pipeline-anchors §4.3).
The README documents the same columns for people.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

STRINGS = pa.list_(pa.string())

TABLES: dict[str, pa.Schema] = {
    "ledgers": pa.schema([
        ("ledger_id", pa.int64()),
        ("tenant", pa.string()),
        ("namespace", pa.string()),  # "tenant/namespace"
        ("topic", pa.string()),
        ("state", pa.string()),  # OPEN, IN_RECOVERY, CLOSED
        ("ensemble_size", pa.int32()),
        ("write_quorum", pa.int32()),
        ("ack_quorum", pa.int32()),
        ("length", pa.int64()),  # bytes
        ("last_entry_id", pa.int64()),  # -1: no entry
        ("placement_policy", pa.string()),  # recorded in the ledger's custom metadata, or null
    ]),
    "fragments": pa.schema([
        ("ledger_id", pa.int64()),
        ("segment", pa.int32()),  # index of the ensemble change within the ledger
        ("first_entry_id", pa.int64()),
        ("last_entry_id", pa.int64()),
        ("ensemble", pa.list_(pa.int32())),  # bookie_index values, in ensemble order
    ]),
    "bookies": pa.schema([
        ("bookie_index", pa.int32()),
        ("bookie_id", pa.string()),
        ("registered", pa.bool_()),
        ("read_only", pa.bool_()),
        ("rack", pa.string()),  # as stored in /bookies; null: default rack
        ("region", pa.string()),  # derived from the rack path (region-aware: /region/rack)
        ("group", pa.string()),  # null: in no group (absent from /bookies)
        ("hostname", pa.string()),
        ("disk_used", pa.int64()),
        ("disk_capacity", pa.int64()),
    ]),
    "policies": pa.schema([
        ("namespace", pa.string()),
        ("primary_groups", STRINGS),
        ("secondary_groups", STRINGS),
        ("strict", pa.bool_()),
        ("ensemble_size", pa.int32()),  # persistence policy, null when unset
        ("write_quorum", pa.int32()),
        ("ack_quorum", pa.int32()),
    ]),
    "config": pa.schema([
        ("placement_mode", pa.string()),  # rack-aware, region-aware, zone-aware
        ("min_racks", pa.int32()),  # bookkeeperClientMinNumRacksPerWriteQuorum
        ("enforce_min_racks", pa.bool_()),  # ...EnforceMinNumRacksPerWriteQuorum
        ("strict_bookie_affinity", pa.bool_()),  # strictBookieAffinityEnabled
        ("isolation_groups", STRINGS),  # bookkeeperClientIsolationGroups
        ("secondary_isolation_groups", STRINGS),
        ("regions_to_write", STRINGS),  # reppRegionsToWrite
        ("min_regions", pa.int32()),  # reppMinimumRegionsForDurability
    ]),
}


#: Optional columns of `fragments`: its ledger's row, repeated on every fragment (the
#: snapshot and synth write them). With all of them present the audit judges fragments
#: without joining them to `ledgers` (no shuffle); a ledger's fragments then must all be in
#: one part file, which both writers ensure (`pipeline.synth.write_table`).
LEDGER_COLUMNS = pa.schema([
    ("namespace", pa.string()),
    ("state", pa.string()),
    ("write_quorum", pa.int32()),
    ("ack_quorum", pa.int32()),
    ("ledger_length", pa.int64()),  # ledgers.length
    ("ledger_last_entry_id", pa.int64()),  # ledgers.last_entry_id
])
FRAGMENTS_DENORMALISED = pa.schema([*TABLES["fragments"], *LEDGER_COLUMNS])


class SnapshotError(Exception):
    """The snapshot is missing a table, or a table has the wrong columns or types."""


def table_path(snapshot: Path, table: str) -> Path:
    """The directory or single file holding `table`."""
    for candidate in (snapshot / table, snapshot / f"{table}.parquet"):
        if candidate.exists():
            return candidate
    raise SnapshotError(f"snapshot {snapshot}: table '{table}' is missing "
                        f"(expected {snapshot / table}/ or {snapshot / table}.parquet)")


def check_snapshot(snapshot: Path) -> dict[str, Path]:
    """Every table's path, after checking its columns and types (Parquet footers only)."""
    if not snapshot.is_dir():
        raise SnapshotError(f"snapshot {snapshot} is not a directory")
    paths: dict[str, Path] = {}
    for table, want in TABLES.items():
        path = table_path(snapshot, table)
        try:
            got = ds.dataset(path, format="parquet").schema
        except (pa.ArrowInvalid, OSError) as exc:
            raise SnapshotError(f"table '{table}' at {path} is not readable Parquet: "
                                f"{exc}") from None
        problems = []
        for f in want:
            idx = got.get_field_index(f.name)
            if idx < 0:
                problems.append(f"column '{f.name}' ({f.type}) is missing")
            elif not _compatible(got.field(idx).type, f.type):
                problems.append(f"column '{f.name}' is {got.field(idx).type}, expected {f.type}")
        if table == "fragments":  # optional columns: absent, or of the right type
            for f in LEDGER_COLUMNS:
                idx = got.get_field_index(f.name)
                if idx >= 0 and not _compatible(got.field(idx).type, f.type):
                    problems.append(f"column '{f.name}' is {got.field(idx).type}, "
                                    f"expected {f.type}")
        if problems:
            raise SnapshotError(f"table '{table}' at {path}: " + "; ".join(problems))
        paths[table] = path
    return paths


def denormalised(fragments: Path) -> bool:
    """Whether the `fragments` table at `fragments` carries every LEDGER_COLUMNS column."""
    names = set(ds.dataset(fragments, format="parquet").schema.names)
    return all(f.name in names for f in LEDGER_COLUMNS)


def _compatible(got: pa.DataType, want: pa.DataType) -> bool:
    if pa.types.is_list(want):
        return (pa.types.is_list(got) or pa.types.is_large_list(got)) and _compatible(
            got.value_type, want.value_type)
    if pa.types.is_string(want):
        return pa.types.is_string(got) or pa.types.is_large_string(got)
    return bool(got == want)


def read_table(path: Path, schema: pa.Schema) -> pa.Table:
    """A small table (bookies, policies, config) read whole, cast to its schema."""
    return ds.dataset(path, format="parquet").to_table(columns=schema.names).cast(schema)
