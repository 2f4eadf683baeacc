"""One SparkSession (local[2]) and one audited synthetic snapshot for every Spark test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.synth import KINDS, SynthSpec, generate

SPEC = SynthSpec(ledgers=1500, bookies=150, racks=5, groups=3, seed=11, degraded=True,
                 rates=dict.fromkeys(KINDS, 0.01))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from pipeline.io import spark_session

    session = spark_session("local[2]", shuffle_partitions=2, driver_memory="1g")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("snapshot")
    generate(SPEC, out)
    return out


@pytest.fixture(scope="session")
def audited(spark: Any, snapshot: Path, tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[Path, dict[str, Any]]:
    from pipeline.audit import run_audit

    out = tmp_path_factory.mktemp("audit")
    return out, run_audit(spark, snapshot, out)
