"""The placement console in headless Chromium: time to the first full view, and the delay from a
rack write to its appearance on the page, each next to a baseline taken in the same run.

    python -m bench.console_bench [--bookies 1000 10000] [--ledgers 100000] [--writes 5]

For each bookie count: a fresh etcd and server (`python -m api`, no bookie processes), seeded
with that many bookies in the rack map (20 per rack, 10 groups; one in 50 not registered, so
shown "not running"), one namespace per group with strict affinity to it, and `--ledgers`
ledger metadata records (E=Qw=Qa=2, one ledger in 100 with a member outside its namespace's
group, so the violations list is not empty).

- first answer: the first overview right after the server answers HTTP; the service reads
  every ledger in the background from its start, so it answers at once with the bookies and
  namespaces and `ledgerStatus` `reading` (n of N). Measured once, not part of the ratios.
- ledgers read: from the server answering HTTP until the overview's `ledgerStatus` is
  `ready` (every ledger read and judged once); measured once, not part of the ratios.
- first full view: from navigation start (`performance.now()` in the page) until the topology,
  the namespaces and the placement violations are rendered; baseline: one
  `GET /admin/v2/console/overview` of the same data from Python (what the page must fetch).
- rack write to page: a bookie's rack changed with `POST /admin/v2/bookies/racks-info/...`
  until its tile shows in the new rack, the median of `--writes` writes; baseline: the same
  write until the `bookies` watch stream (`GET /admin/v2/watch`) delivers it to a Python client.

Chromium is Debian's (`/usr/bin/chromium`) driven by Playwright, as the console tests do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.api_bench import etcd_client
from bench.harness import BenchServer, machine
from metastore import paths
from metastore.embedded import EmbeddedEtcd
from metastore.ledger_metadata import LedgerMetadata, LedgerState, encode_ledger_metadata
from storage.ledger.metadata import managed_ledger_custom_metadata

PER_RACK = 20
GROUPS = 10
BATCH = 100  # puts per etcd transaction (etcd's --max-txn-ops is 128)


def bookie_id(i: int) -> str:
    return f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}:3181"


async def seed(etcd: EmbeddedEtcd, bookies: int, ledgers: int) -> None:
    ids = [bookie_id(i) for i in range(bookies)]
    rack_map: dict[str, dict[str, Any]] = {}
    for i, bookie in enumerate(ids):
        rack_map.setdefault(f"group-{i % GROUPS}", {})[bookie] = {
            "rack": f"/rack-{i // PER_RACK}", "hostname": f"bk{i}"}
    puts: list[tuple[str, bytes]] = [(paths.BOOKIES_RACK_CONFIG, json.dumps(rack_map).encode())]
    puts += [(f"{paths.BOOKIES_AVAILABLE}/{b}", b"") for i, b in enumerate(ids) if i % 50 != 49]
    puts += [("/admin/policies/bench", json.dumps({"adminRoles": [],
                                                   "allowedClusters": ["bench"]}).encode())]
    for g in range(GROUPS):
        policies = {"persistence": {"bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2,
                                    "bookkeeperAckQuorum": 2, "managedLedgerMaxMarkDeleteRate": 0},
                    "bundles": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1}}
        puts.append((f"/admin/policies/bench/ns{g}", json.dumps(policies).encode()))
        local = {"bookieAffinityGroup": {"bookkeeperAffinityGroupPrimary": f"group-{g}",
                                         "bookkeeperAffinityGroupStrict": True}}
        puts.append((f"/admin/local-policies/bench/ns{g}", json.dumps(local).encode()))
    for ledger in range(1, ledgers + 1):
        g = ledger % GROUPS
        first = (ledger * 7 * GROUPS + g) % bookies
        second = (first + PER_RACK) % bookies  # the same group, the next rack
        if ledger % 100 == 0:
            second = (first + 1) % bookies  # another group's bookie
        metadata = LedgerMetadata(
            ledger_id=ledger, ensemble_size=2, write_quorum_size=2, ack_quorum_size=2,
            ensembles={0: (ids[first], ids[second])}, state=LedgerState.CLOSED,
            custom_metadata=managed_ledger_custom_metadata(
                f"bench/ns{g}/persistent/t{ledger % 50}", None),
        )  # fmt: skip
        puts.append((paths.ledger(ledger), encode_ledger_metadata(metadata)))
    async with etcd_client(etcd, timeout=60) as client:
        tx = client.transactions
        for start in range(0, len(puts), BATCH):
            batch = puts[start:start + BATCH]
            await client.transaction(compare=[], success=[
                tx.put(key.encode(), value) for key, value in batch], failure=[])


def warm_up_seconds(url: str, bound: float = 600.0) -> tuple[float, str, float]:
    """The first overview's time and `ledgerStatus.state`, and the time from the first
    request until the overview says every ledger is read and judged (`ready`)."""
    start = time.perf_counter()
    with httpx.Client(base_url=url, timeout=120) as http:
        first = http.get("/admin/v2/console/overview")
        answered = time.perf_counter() - start
        first.raise_for_status()
        state = first.json()["ledgerStatus"]["state"]
        while time.perf_counter() - start < bound:
            found = http.get("/admin/v2/console/overview")
            if found.status_code == 200 and found.json()["ledgerStatus"]["state"] == "ready":
                return answered, state, time.perf_counter() - start
            time.sleep(0.2)
    raise RuntimeError("the console overview never said every ledger was read")


def overview_seconds(url: str, rounds: int = 3) -> float:
    times = []
    with httpx.Client(base_url=url, timeout=120) as http:
        for _ in range(rounds):
            start = time.perf_counter()
            http.get("/admin/v2/console/overview").raise_for_status()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


FULL_VIEW = """() => document.body.dataset.revision !== undefined
    && document.querySelectorAll('.tile').length > 0
    && document.querySelectorAll('#namespace-rows tr').length > 0
    && document.querySelectorAll('#violation-list .row').length > 0"""


def first_view_seconds(browser: Any, url: str, rounds: int = 3) -> float:
    times = []
    for _ in range(rounds):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.goto(url + "/console/")
        page.wait_for_function(FULL_VIEW, timeout=120_000, polling="raf")
        times.append(page.evaluate("() => performance.now()") / 1000)
        context.close()
    return statistics.median(times)


def watch_delay(url: str, bookie: str, rack: str) -> float:
    """Seconds from the write until the `bookies` stream delivers it to a Python client."""
    seen = threading.Event()
    opened = threading.Event()

    def follow() -> None:
        with httpx.Client(base_url=url, timeout=60) as http, http.stream(
                "GET", "/admin/v2/watch", params={"prefix": "bookies"}) as response:
            for line in response.iter_lines():
                opened.set()
                if line.startswith("data:") and rack in line:
                    seen.set()
                    return

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    opened.wait(30)
    start = time.perf_counter()
    write_rack(url, bookie, rack)
    seen.wait(60)
    delay = time.perf_counter() - start
    thread.join(60)
    return delay


def write_rack(url: str, bookie: str, rack: str) -> None:
    httpx.post(f"{url}/admin/v2/bookies/racks-info/{bookie}", params={"group": "group-0"},
               json={"rack": rack, "hostname": "bk0"}, timeout=30).raise_for_status()


def page_delays(browser: Any, url: str, writes: int) -> list[float]:
    bookie = bookie_id(0)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(url + "/console/")
    page.wait_for_function(FULL_VIEW, timeout=120_000)
    page.wait_for_function("() => document.getElementById('live').textContent === 'live'",
                           timeout=60_000)
    page.fill("#bookie-search", "bk0 ")  # the hostname, with the space that ends it
    delays = []
    for i in range(writes):
        rack = f"/moved-{i}"
        start = time.perf_counter()
        write_rack(url, bookie, rack)
        page.wait_for_function(
            """([bookie, rack]) => {
                const tile = document.querySelector(`.tile[data-bookie="${bookie}"]`);
                const area = tile && tile.closest('.area.rack');
                return area && area.querySelector('h4').textContent.startsWith(`Rack ${rack} `);
            }""", arg=[bookie, rack], timeout=60_000, polling="raf")
        delays.append(time.perf_counter() - start)
    context.close()
    return delays


def run(bookie_counts: list[int], ledgers: int, writes: int) -> list[dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    results = []
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for count in bookie_counts:
            with tempfile.TemporaryDirectory(prefix="console-bench-") as tmp:
                work = Path(tmp)
                etcd = EmbeddedEtcd(work / "etcd")
                etcd.start()
                try:
                    # Playwright's sync API holds this thread's event loop: seed from another
                    with ThreadPoolExecutor(1) as pool:
                        pool.submit(asyncio.run, seed(etcd, count, ledgers)).result()
                    with BenchServer(etcd, work, conf={"initializeClusterMetadata": "false"}
                                     ) as server:
                        answered, state, warm = warm_up_seconds(server.url)
                        api = overview_seconds(server.url)
                        view = first_view_seconds(browser, server.url)
                        sse = [watch_delay(server.url, bookie_id(0), f"/sse-{i}")
                               for i in range(writes)]
                        page = page_delays(browser, server.url, writes)
                finally:
                    etcd.stop()
            results.append({"bookies": count, "ledgers": ledgers, "firstAnswer": answered,
                            "firstState": state, "warmUp": warm, "overview": api,
                            "firstView": view, "watch": statistics.median(sse),
                            "page": statistics.median(page)})
        browser.close()
    return results


def report(results: list[dict[str, Any]]) -> str:
    lines = [
        f"machine: {machine()}",
        "",
        "| bookies | ledgers | first answer (once) | ledgers read (once) | overview GET "
        "| first full view | ratio | rack write: watch | rack write: page | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['bookies']:,} | {r['ledgers']:,} "
            f"| {r['firstAnswer'] * 1000:.0f} ms ({r['firstState']}) | {r['warmUp']:.1f} s "
            f"| {r['overview'] * 1000:.0f} ms "
            f"| {r['firstView'] * 1000:.0f} ms | {r['firstView'] / r['overview']:.2f} "
            f"| {r['watch'] * 1000:.0f} ms | {r['page'] * 1000:.0f} ms "
            f"| {r['page'] / r['watch']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bookies", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--ledgers", type=int, default=100_000)
    parser.add_argument("--writes", type=int, default=5)
    args = parser.parse_args(argv)
    print(report(run(args.bookies, args.ledgers, args.writes)))


if __name__ == "__main__":
    main()
