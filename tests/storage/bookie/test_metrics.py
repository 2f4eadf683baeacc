"""A bookie's metrics: BookKeeper's names in the Prometheus text format on the bookie's own
`prometheusStatsHttpPort`, counting what really happened (adds, a failed read, journal
syncs); `enableStatistics=false` records and serves nothing."""

from __future__ import annotations

import math

import httpx
from prometheus_client.parser import text_string_to_metric_families

from metastore.embedded import free_port
from storage.bookie.errors import NoEntry
from storage.bookie.metrics import OpStats
from storage.bookie_client import BookieClient
from tests.storage.bookie.conftest import BookieFactory
from tests.storage.bookie.support import MASTER_KEY, entry


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Each sample by its name as written (the parser would add `_total` to counters) and
    its sorted labels; the text must parse as the Prometheus format."""
    families = list(text_string_to_metric_families(text))
    assert families
    found = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, _, rest = head.partition("{")
        labels = tuple(sorted(tuple(pair.split("=", 1)) for pair in rest.rstrip("}").split(",")
                              if pair)) if rest else ()
        found[(name, tuple((k, v.strip('"')) for k, v in labels))] = float(value)
    return found


def test_op_stats_estimate_quantiles_from_their_buckets() -> None:
    stats = OpStats((1.0, 2.0, 5.0))
    assert math.isnan(stats.quantile(0.5))
    for value in (0.5, 0.7, 1.5, 4.0, 9.0):
        stats.record(value)
    stats.record(3.0, ok=False)
    assert stats.count() == 5 and stats.count(ok=False) == 1
    assert stats.quantile(0.4) == 1.0  # 2 of 5 values <= 1 ms
    assert stats.quantile(0.6) == 2.0
    assert stats.quantile(0.99) == 9.0 and stats.quantile(1.0) == 9.0  # overflow: the max
    assert stats.sums[True] == 0.5 + 0.7 + 1.5 + 4.0 + 9.0


async def test_bookie_serves_its_metrics_under_bookkeepers_names(
    start_bookie: BookieFactory,
) -> None:
    port = free_port()
    bookie = start_bookie(conf={"prometheusStatsHttpPort": str(port)})
    entries = [entry(7, i) for i in range(5)]
    async with await BookieClient.connect(bookie.bookie_id) as client:
        for i, packaged in enumerate(entries):
            await client.add(7, i, MASTER_KEY, packaged)
        assert await client.read(7, 0) == entries[0]
        try:
            await client.read(7, 99)
        except NoEntry:
            pass
        else:
            raise AssertionError("entry 99 exists")
    async with httpx.AsyncClient() as http:
        response = await http.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    found = samples(response.text)
    ok, failed = (("success", "true"),), (("success", "false"),)
    assert found[("bookkeeper_server_ADD_ENTRY_REQUEST_count", ok)] == 5
    assert found[("bookkeeper_server_ADD_ENTRY_count", ok)] == 5
    assert found[("bookkeeper_server_READ_ENTRY_REQUEST_count", ok)] == 1
    assert found[("bookkeeper_server_READ_ENTRY_REQUEST_count", failed)] == 1
    assert found[("bookie_WRITE_BYTES", ())] == sum(len(e) for e in entries)
    assert found[("bookie_READ_BYTES", ())] == len(entries[0])
    syncs = found[("bookie_journal_JOURNAL_SYNC_count", ok)]
    assert 1 <= syncs <= 6  # master key + 5 entries, grouped
    assert found[("bookie_journal_JOURNAL_FORCE_WRITE_BATCH_ENTRIES_sum", ok)] == 6
    assert found[("bookie_journal_JOURNAL_SYNC", (("quantile", "0.99"), *ok))] > 0
    assert found[("bookie_SERVER_STATUS", ())] == 1
    assert found[("bookie_ledgers_count", ())] == 1
    assert "# TYPE bookie_WRITE_BYTES counter" in response.text  # no _total, as upstream


async def test_statistics_off_serves_nothing(start_bookie: BookieFactory) -> None:
    port = free_port()
    bookie = start_bookie(conf={"prometheusStatsHttpPort": str(port),
                                "enableStatistics": "false"})
    async with await BookieClient.connect(bookie.bookie_id) as client:
        await client.add(8, 0, MASTER_KEY, entry(8, 0))
    async with httpx.AsyncClient() as http:
        try:
            await http.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
        except httpx.ConnectError:
            return
    raise AssertionError("metrics served with enableStatistics=false")
