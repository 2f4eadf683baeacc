"""A bookie's metrics, under the names BookKeeper's Prometheus stats provider gives them, served
in the Prometheus text format at `/metrics` on the bookie's own HTTP port
(`prometheusStatsHttpPort`, as upstream; `storage.bookie.service` starts it).

Cheap on the add path: recording is a `bisect` into fixed latency buckets and a few integer
additions, no lock (one asyncio thread records; the journal thread records its own syncs); the
Prometheus objects are only built when scraped (`BookieCollector`). Latencies are in
milliseconds, as upstream's `OpStatsLogger`s report them: a summary per operation with a
`success` label, quantiles estimated from the buckets (the upper bound of the bucket holding
the quantile; 1.0 is the largest value seen).

What is exported (upstream names; `reference-metrics` "BookKeeper"):

- `bookie_SERVER_STATUS` (gauge): 1 writable, 0 read-only;
- `bookkeeper_server_ADD_ENTRY_REQUEST` and `bookkeeper_server_ADD_ENTRY` (summaries, one
  measurement under both names here): add latency, request to response;
- `bookkeeper_server_READ_ENTRY_REQUEST`, `bookkeeper_server_READ_ENTRY`: the same for reads
  (fencing reads included);
- `bookie_WRITE_BYTES`, `bookie_READ_BYTES` (counters): entry bytes added and read;
- `bookie_journal_JOURNAL_SYNC` (summary): fdatasync latency of a journal group;
- `bookie_journal_JOURNAL_FORCE_WRITE_BATCH_ENTRIES`, `..._BATCH_BYTES` (summaries): records
  and bytes per synced group;
- `bookie_journal_JOURNAL_WRITE_BYTES` (counter), `bookie_journal_JOURNAL_QUEUE_SIZE` (gauge:
  records waiting for the next group);
- `bookie_ledgers_count`, `bookie_write_cache_size` (gauges).

adds/s is `rate(bookkeeper_server_ADD_ENTRY_count{success="true"}[1m])`.

`render` writes the text format as upstream's `PrometheusTextFormat` does: a counter's
`# TYPE` line and its sample carry the same name, without the `_total` that
`prometheus_client`'s own writer would add to the `# TYPE` line.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

LATENCY_MS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0,
              1000.0, 2000.0, 5000.0, 10000.0)
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384, 65536, 262144, 1048576,
         4194304)
QUANTILES = (0.5, 0.75, 0.95, 0.99, 0.999, 0.9999, 1.0)
EOK = 0


class OpStats:
    """Counts per bucket, sum and maximum of one operation's values, successes and failures
    apart. `record` is all the hot path pays."""

    __slots__ = ("bounds", "buckets", "maxima", "sums")

    def __init__(self, bounds: Sequence[float] = LATENCY_MS) -> None:
        self.bounds = tuple(bounds)
        # [failed, succeeded]
        self.buckets = ([0] * (len(self.bounds) + 1), [0] * (len(self.bounds) + 1))
        self.sums = [0.0, 0.0]
        self.maxima = [0.0, 0.0]

    def record(self, value: float, ok: bool = True) -> None:
        self.buckets[ok][bisect_left(self.bounds, value)] += 1
        self.sums[ok] += value
        if value > self.maxima[ok]:
            self.maxima[ok] = value

    def record_many(self, value: float, times: int, ok: bool = True) -> None:
        """`record(value, ok)` `times` times over."""
        self.buckets[ok][bisect_left(self.bounds, value)] += times
        self.sums[ok] += value * times
        if value > self.maxima[ok]:
            self.maxima[ok] = value

    def count(self, ok: bool = True) -> int:
        return sum(self.buckets[ok])

    def quantile(self, q: float, ok: bool = True) -> float:
        """Estimated from the buckets; NaN with no value (as upstream's empty sketch)."""
        counts = list(self.buckets[ok])
        total = sum(counts)
        if not total:
            return math.nan
        if q >= 1.0:
            return self.maxima[ok]
        wanted = q * total
        seen = 0
        for index, n in enumerate(counts):
            seen += n
            if seen >= wanted and n:
                bound = self.bounds[index] if index < len(self.bounds) else self.maxima[ok]
                return min(bound, self.maxima[ok])
        return self.maxima[ok]


class BookieMetrics:
    """What the request handler and the journal record."""

    def __init__(self) -> None:
        self.add = OpStats()
        self.read = OpStats()
        self.write_bytes = 0
        self.read_bytes = 0
        self.journal_sync = OpStats()
        self.journal_batch_entries = OpStats(SIZES)
        self.journal_batch_bytes = OpStats(SIZES)
        self.journal_write_bytes = 0

    def added(self, started: float, code: int, size: int) -> None:
        """An add answered `code`; `started` is its `time.perf_counter()` at arrival."""
        ok = code == EOK
        self.add.record((time.perf_counter() - started) * 1000.0, ok)
        if ok:
            self.write_bytes += size

    def added_many(self, started: float, count: int, size: int, ok: bool) -> None:
        """`count` adds that arrived together at `started` answered together (`size`: their
        entries' bytes)."""
        self.add.record_many((time.perf_counter() - started) * 1000.0, count, ok)
        if ok:
            self.write_bytes += size

    def was_read(self, started: float, code: int, size: int) -> None:
        ok = code == EOK
        self.read.record((time.perf_counter() - started) * 1000.0, ok)
        self.read_bytes += size

    def journal_synced(self, seconds: float, records: int, size: int) -> None:
        """From the journal thread, after a group's fdatasync."""
        self.journal_sync.record(seconds * 1000.0)
        self.journal_batch_entries.record(records)
        self.journal_batch_bytes.record(size)
        self.journal_write_bytes += size


@dataclass(frozen=True)
class BookieGauges:
    """Read at scrape time from the running bookie."""

    writable: Callable[[], bool]
    ledgers: Callable[[], int]
    write_cache_bytes: Callable[[], int]
    journal_queue: Callable[[], int]


def summary(name: str, doc: str, stats: OpStats) -> Metric:
    metric = Metric(name, doc, "summary")
    for ok in (False, True):
        labels = {"success": "true" if ok else "false"}
        for q in QUANTILES:
            metric.add_sample(name, {**labels, "quantile": str(q)}, stats.quantile(q, ok))
        metric.add_sample(f"{name}_count", labels, stats.count(ok))
        metric.add_sample(f"{name}_sum", labels, stats.sums[ok])
    return metric


def single(name: str, doc: str, kind: str, value: float) -> Metric:
    """A counter or gauge under exactly `name` (upstream's counters carry no `_total`)."""
    metric = Metric(name, doc, kind)
    metric.add_sample(name, {}, value)
    return metric


class BookieCollector(Collector):
    def __init__(self, metrics: BookieMetrics, gauges: BookieGauges) -> None:
        self.metrics = metrics
        self.gauges = gauges

    def collect(self) -> Iterator[Metric]:
        m, g = self.metrics, self.gauges
        yield single("bookie_SERVER_STATUS", "1: writable, 0: read-only", "gauge",
                     1 if g.writable() else 0)
        for name in ("bookkeeper_server_ADD_ENTRY_REQUEST", "bookkeeper_server_ADD_ENTRY"):
            yield summary(name, "add latency (ms), request to response", m.add)
        for name in ("bookkeeper_server_READ_ENTRY_REQUEST", "bookkeeper_server_READ_ENTRY"):
            yield summary(name, "read latency (ms), request to response", m.read)
        yield single("bookie_WRITE_BYTES", "entry bytes added", "counter", m.write_bytes)
        yield single("bookie_READ_BYTES", "entry bytes read", "counter", m.read_bytes)
        yield summary("bookie_journal_JOURNAL_SYNC", "journal group fdatasync latency (ms)",
                      m.journal_sync)
        yield summary("bookie_journal_JOURNAL_FORCE_WRITE_BATCH_ENTRIES",
                      "records per synced journal group", m.journal_batch_entries)
        yield summary("bookie_journal_JOURNAL_FORCE_WRITE_BATCH_BYTES",
                      "bytes per synced journal group", m.journal_batch_bytes)
        yield single("bookie_journal_JOURNAL_WRITE_BYTES", "bytes written to the journal",
                     "counter", m.journal_write_bytes)
        yield single("bookie_journal_JOURNAL_QUEUE_SIZE", "records waiting for a group",
                     "gauge", g.journal_queue())
        yield single("bookie_ledgers_count", "ledgers stored", "gauge", g.ledgers())
        yield single("bookie_write_cache_size", "bytes in the write cache", "gauge",
                     g.write_cache_bytes())


def render(metrics: Iterable[Metric]) -> bytes:
    """The Prometheus text exposition (format 0.0.4) of `metrics`."""
    lines: list[str] = []
    for metric in metrics:
        lines.append(f"# HELP {metric.name} {metric.documentation}")
        lines.append(f"# TYPE {metric.name} {metric.type}")
        for sample in metric.samples:
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in sample.labels.items())
            value = floatToGoString(sample.value)
            lines.append(f"{sample.name}{{{labels}}} {value}" if labels
                         else f"{sample.name} {value}")
    return ("\n".join(lines) + "\n").encode()


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
