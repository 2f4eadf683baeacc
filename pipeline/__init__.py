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

Nothing else in the project imports it (import-linter holds that). Its entries: the command
line, and for scripts and the benchmarks `pipeline.snapshot.snapshot`, `pipeline.audit.run_audit`
(an `AuditSummary`) and `pipeline.synth.generate`.
"""

__all__: list[str] = []
