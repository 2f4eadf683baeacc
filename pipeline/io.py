"""Spark I/O: a quiet SparkSession, the snapshot's big tables as DataFrames, Arrow helpers.

Log noise: the driver JVM starts with a log4j2 configuration at ERROR (written to a
temporary file), so the CLI prints only its own lines; Spark's console progress bar is
on only when stderr is a terminal.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


#: JVM flags of the driver (in local mode also the executors)
DRIVER_JVM_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_session(master: str | None = None, *, shuffle_partitions: int = 8,
                  driver_memory: str = "2g", app: str = "placement-audit",
                  jvm_log: Path | None = None) -> Any:
    """A SparkSession for `master` (default local[*]) with the audit's settings.

    With `jvm_log`, the driver JVM's own stderr (launcher warnings, anything log4j still
    prints) goes to that file instead of the terminal.
    """
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\..*")
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    conf_dir = Path(tempfile.mkdtemp(prefix="audit-log4j-"))
    (conf_dir / "log4j2.properties").write_text(LOG4J2)
    log_opt = f"-Dlog4j.configurationFile=file:{conf_dir / 'log4j2.properties'}"
    # the driver JVM only hands file names to the Python tasks and collects their rows: the
    # C1 compiler alone and the serial collector roughly halve its CPU (start included)
    driver_opt = f"{log_opt} {DRIVER_JVM_FLAGS}"
    builder = (
        SparkSession.builder.master(master or "local[*]").appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", str(sys.stderr.isatty()).lower())
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.extraJavaOptions", driver_opt)
        .config("spark.executor.extraJavaOptions", log_opt)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "65536")
        # a ledger's fragments must stay in one partition after the join (per-partition
        # distinct counts); skew splitting would cut them apart
        .config("spark.sql.adaptive.skewJoin.enabled", "false")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    )
    if jvm_log is None:
        spark = builder.getOrCreate()
    else:  # the JVM inherits fd 2 at launch: point it at the log file meanwhile
        jvm_log.parent.mkdir(parents=True, exist_ok=True)
        saved = os.dup(2)
        with jvm_log.open("ab") as sink:
            sys.stderr.flush()
            os.dup2(sink.fileno(), 2)
            try:
                spark = builder.getOrCreate()
            finally:
                os.dup2(saved, 2)
                os.close(saved)
    spark.sparkContext.setLogLevel("ERROR")
    if not (master or "local").startswith("local"):
        ship_code(spark)
    return spark


def ship_code(spark: Any) -> Path:
    """Give a cluster's executors the code their tasks run (`pipeline` and `placement`,
    pure Python) as one zip (`addPyFile`); their Python still needs numpy, pyarrow, re2."""
    import zipfile

    root = Path(__file__).resolve().parent.parent
    target = Path(tempfile.mkdtemp(prefix="audit-code-")) / "audit-code.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in ("pipeline", "placement"):
            for source in sorted((root / package).rglob("*.py")):
                zf.write(source, source.relative_to(root).as_posix())
    spark.sparkContext.addPyFile(str(target))
    return target


def padded(ensembles: pa.Array) -> npt.NDArray[np.int32]:
    """A list<int32> column as int32 [n, E_max], -1 on the right (nulls become -1)."""
    n = len(ensembles)
    if isinstance(ensembles, pa.ChunkedArray):
        ensembles = ensembles.combine_chunks()
    offsets = np.asarray(ensembles.offsets, dtype=np.int64)  # absolute, into .values
    lengths = np.diff(offsets)
    if ensembles.null_count:
        lengths = np.where(np.asarray(ensembles.is_null()), 0, lengths)
    values = pc.fill_null(ensembles.values, -1).to_numpy(zero_copy_only=False)
    width = int(lengths.max()) if n else 0
    out = np.full((n, max(width, 1)), -1, np.int32)
    rows = np.repeat(np.arange(n), lengths)
    cols = np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out[rows, cols] = values[offsets[:-1][rows] + cols]
    return out
