"""`python -m pipeline.snapshot --metadata-store-url URL --out DIR`: a cluster's metadata as
the five Parquet tables of `pipeline.schema`.

Sources (`--metadata-store-url`, Pulsar's forms):

- `etcd:http://h:p[,h:p]` — ours, or any Pulsar whose metadata store is etcd;
- `zk:host:2181[,host:2181]` — a Pulsar on ZooKeeper, read with `kazoo` (same paths, same
  bytes; Pulsar's BookKeeper ledger layout there is the same hierarchical one).

What is read, all at Pulsar's paths (DESIGN.md section 3):

- ledger metadata at the hierarchical keys `/ledgers/00/0000/L0001` (V3, V2 or V1 values,
  `metastore.ledger_metadata`), in paged range reads: one keys-only page at a time finds
  each page's bounds, then up to `--concurrency` pages of values are read at once, so a large
  export keeps at most `concurrency * page_size` values in flight and etcd never sees an
  unbounded range;
- a ledger's topic from its custom metadata `pulsar/managed-ledger` (UTF-8 text, the managed
  ledger's name `tenant/ns/persistent/<encoded topic>`, as Pulsar's `LedgerMetadataUtils` and
  our storage engine write it; the ledger-metadata JSON of BookKeeper's admin API shows it
  base64, the stored value is plain), else from the `ManagedLedgerInfo` under
  `/managed-ledgers` that lists the ledger;
- `/bookies` (groups, racks, hostnames), the registrations under `/ledgers/available`
  (read-only ones under `readonly/`), namespace policies (persistence) and local policies
  (bookie affinity groups);
- the placement config from `--config broker.conf` and `--set key=value` (broker.conf keys).

Bookies are numbered by sorted id. A bookie named in an ensemble but neither registered nor
in `/bookies` still gets an index (registered false, no rack, no group). A fragment's last
entry id is the next fragment's first minus one; the last fragment's is the ledger's last
entry id when closed, -1 otherwise. Disk figures are not in the metadata: each registered
bookie is asked for them with BookKeeper's V3 GET_BOOKIE_INFO (the data file system's total
and free bytes, as upstream's clients ask for disk-weighted placement; `disk_used` = total -
free), 16 at a time with `--timeout`; a bookie that does not answer (or `--no-bookie-info`)
leaves them null.

Progress goes to stderr; stdout gets one JSON line of counts. Exit 2 with a message naming
the problem when the store cannot be reached or a stored value cannot be decoded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote_plus

import numpy as np
import pyarrow as pa

from metastore import paths
from metastore.documents import (
    decode_local_policies,
    decode_policies,
    decode_rack_config,
    registrations_of,
)
from metastore.errors import MetastoreError
from metastore.ledger_metadata import LedgerMetadata, LedgerState, decode_ledger_metadata
from metastore.managed_ledger_info import decode_managed_ledger_info
from pipeline.schema import LEDGER_COLUMNS, TABLES
from pipeline.synth import write_table
from placement import PlacementConfig
from placement.config import parse_broker_conf
from placement.topology import UNKNOWN_REGION, region_of
from storage.bookie_client import BookieClient

MANAGED_LEDGER_NAME = "pulsar/managed-ledger"
PLACEMENT_POLICY_CONFIG = "EnsemblePlacementPolicyConfig"
_SCAN_START = paths.LEDGERS + "/0"
_SCAN_END = paths.LEDGERS + "/:"  # the character after "9": only the numbered levels


class SnapshotSourceError(Exception):
    """The metadata store cannot be read, or holds a value that cannot be decoded."""


class Source(Protocol):
    """Read access to a Pulsar metadata store, by path."""

    url: str

    async def get(self, path: str) -> bytes | None: ...

    async def descendants(self, path: str, depth: int) -> dict[str, bytes]:
        """Every node exactly `depth` levels below `path`, by full path."""
        ...

    def ledger_pages(self, page_size: int, concurrency: int
                     ) -> AsyncIterator[list[tuple[int, bytes]]]:
        """Every ledger's (id, stored value), a page at a time, in no particular order."""
        ...

    async def close(self) -> None: ...


# -- etcd -------------------------------------------------------------------------------------


class EtcdSource:
    """Pulsar-on-etcd (and ours): a path is the etcd key; bounded range reads only."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        from metastore.store import parse_metadata_store_url
        from metastore.versioned_keys import VersionedKeys

        self.url = url
        self.keys = VersionedKeys(parse_metadata_store_url(url), timeout=timeout)

    async def get(self, path: str) -> bytes | None:
        found = await self.keys.read(path)
        return None if found is None else found.value

    async def _range(self, start: str, end: str, page_size: int, *, keys_only: bool = False
                     ) -> list[tuple[str, bytes]]:
        out: list[tuple[str, bytes]] = []
        while True:
            page = await self.keys.scan(start, end, limit=page_size, keys_only=keys_only)
            out.extend((key, value) for key, value, _ in page.items)
            if not page.more or not page.items:
                return out
            start = page.items[-1][0] + "\0"

    async def descendants(self, path: str, depth: int) -> dict[str, bytes]:
        prefix = path.rstrip("/") + "/"
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return {key: value for key, value in await self._range(prefix, end, 1000)
                if key[len(prefix):].count("/") == depth - 1 and not key.endswith("/")}

    async def ledger_pages(self, page_size: int, concurrency: int
                           ) -> AsyncIterator[list[tuple[int, bytes]]]:
        start, more = _SCAN_START, True
        while more:
            bounds: list[tuple[str, str]] = []
            while more and len(bounds) < concurrency:  # keys-only: cheap page bounds
                page = await self.keys.scan(start, _SCAN_END, limit=page_size, keys_only=True)
                if not page.items:
                    break
                end = page.items[-1][0] + "\0"
                bounds.append((start, end))
                start, more = end, page.more
            if not bounds:
                return
            pages = await asyncio.gather(*(self._range(s, e, page_size) for s, e in bounds))
            for items in pages:
                yield [(lid, value) for key, value in items
                       if (lid := paths.ledger_id_of(key)) is not None]

    async def close(self) -> None:
        await self.keys.close()


# -- ZooKeeper --------------------------------------------------------------------------------


class ZkSource:
    """Pulsar-on-ZooKeeper through kazoo: the same paths as znodes, the same bytes. kazoo's
    calls block, so they run in a worker thread, issued `concurrency` at a time."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        from kazoo.client import KazooClient

        self.url = url
        hosts = url.removeprefix("zk:").removeprefix("zookeeper:").removeprefix("//")
        hosts, _, chroot = hosts.partition("/")
        self.client = KazooClient(hosts=hosts + (f"/{chroot}" if chroot else ""),
                                  timeout=timeout, read_only=True)
        self.timeout = timeout
        self.concurrency = 16
        self._started = False

    async def _start(self) -> None:
        if not self._started:
            await asyncio.to_thread(self.client.start, self.timeout)
            self._started = True

    def _many(self, call: Callable[[str], Any], items: Sequence[str]) -> list[Any]:
        """`call(path)` for every path (async kazoo calls, `concurrency` in flight); a node
        gone meanwhile gives None."""
        from kazoo.exceptions import NoNodeError

        out: list[Any] = []
        for i in range(0, len(items), self.concurrency):
            pending = [call(p) for p in items[i:i + self.concurrency]]
            for result in pending:
                try:
                    out.append(result.get(timeout=self.timeout))
                except NoNodeError:
                    out.append(None)
        return out

    def _children(self, parents: Sequence[str]) -> list[str]:
        found = self._many(self.client.get_children_async, parents)
        return [f"{p.rstrip('/')}/{c}" for p, kids in zip(parents, found, strict=True)
                for c in sorted(kids or ())]

    def _values(self, nodes: Sequence[str]) -> list[bytes | None]:
        return [None if r is None else bytes(r[0])
                for r in self._many(self.client.get_async, nodes)]

    async def get(self, path: str) -> bytes | None:
        await self._start()
        return (await asyncio.to_thread(self._values, [path]))[0]

    async def descendants(self, path: str, depth: int) -> dict[str, bytes]:
        await self._start()

        def walk() -> dict[str, bytes]:
            level = [path]
            for _ in range(depth):
                level = self._children(level)
            return {p: v for p, v in zip(level, self._values(level), strict=True)
                    if v is not None}

        return await asyncio.to_thread(walk)

    async def ledger_pages(self, page_size: int, concurrency: int
                           ) -> AsyncIterator[list[tuple[int, bytes]]]:
        await self._start()
        self.concurrency = max(1, concurrency) * 4
        tops = await asyncio.to_thread(self._children, [paths.LEDGERS])
        for width in (2, 3):  # 2-4-4 (ids < 2^31-1), then 3-4-4-4-4
            roots = [t for t in tops if _digits(t.rsplit("/", 1)[1], width)]
            for root in roots:  # one top-level directory at a time bounds the memory
                level = [root]
                for _ in range(2 if width == 2 else 4):
                    level = await asyncio.to_thread(self._children, level)
                for i in range(0, len(level), page_size):
                    nodes = [n for n in level[i:i + page_size]
                             if paths.ledger_id_of(n) is not None]
                    values = await asyncio.to_thread(self._values, nodes)
                    yield [(lid, v) for n, v in zip(nodes, values, strict=True)
                           if v is not None and (lid := paths.ledger_id_of(n)) is not None]

    async def close(self) -> None:
        if self._started:
            await asyncio.to_thread(self.client.stop)
            await asyncio.to_thread(self.client.close)


def _digits(text: str, width: int) -> bool:
    return len(text) == width and text.isascii() and text.isdigit()


def open_source(url: str, *, timeout: float = 10.0) -> Source:
    """The source for a Pulsar `metadataStoreUrl` (`etcd:...` or `zk:...`)."""
    if url.startswith("etcd:"):
        return EtcdSource(url, timeout=timeout)
    if url.startswith(("zk:", "zookeeper:")):
        return ZkSource(url, timeout=timeout)
    raise SnapshotSourceError(f"metadata store URL {url!r}: expected etcd:http://host:port[,...]"
                              " or zk:host:port[,...]")


# -- the tables -------------------------------------------------------------------------------


@dataclass
class _Ledgers:
    """Rows of `ledgers` and `fragments` as they are read; ensembles as provisional bookie
    numbers (first-seen order), renumbered once every bookie is known."""

    seen: dict[str, int] = field(default_factory=dict)
    ledgers: list[pa.RecordBatch] = field(default_factory=list)
    fragments: list[dict[str, Any]] = field(default_factory=list)
    count: int = 0

    def add(self, page: Iterable[LedgerMetadata], topics: dict[int, str]) -> None:
        rows: dict[str, list[Any]] = {name: [] for name in TABLES["ledgers"].names}
        frag: dict[str, list[Any]] = {name: [] for name in TABLES["fragments"].names}
        for md in page:
            name = _custom_text(md, MANAGED_LEDGER_NAME) or topics.get(md.ledger_id)
            tenant, namespace, topic = _topic_of(name)
            closed = md.state is LedgerState.CLOSED
            last = md.last_entry_id if closed else -1
            for column, value in (
                ("ledger_id", md.ledger_id), ("tenant", tenant), ("namespace", namespace),
                ("topic", topic), ("state", md.state.name), ("ensemble_size", md.ensemble_size),
                ("write_quorum", md.write_quorum_size), ("ack_quorum", md.ack_quorum_size),
                ("length", md.length if closed else 0), ("last_entry_id", last),
                ("placement_policy", _custom_text(md, PLACEMENT_POLICY_CONFIG)),
            ):
                rows[column].append(value)
            firsts = list(md.ensembles)
            for segment, first in enumerate(firsts):
                frag["ledger_id"].append(md.ledger_id)
                frag["segment"].append(segment)
                frag["first_entry_id"].append(first)
                nxt = firsts[segment + 1] - 1 if segment + 1 < len(firsts) else last
                frag["last_entry_id"].append(nxt)
                frag["ensemble"].append([self.seen.setdefault(b, len(self.seen))
                                         for b in md.ensembles[first]])
            self.count += 1
        self.ledgers.append(pa.RecordBatch.from_pydict(rows, schema=TABLES["ledgers"]))
        self.fragments.append(frag)


def _custom_text(md: LedgerMetadata, key: str) -> str | None:
    raw = md.custom_metadata.get(key)
    if raw is None:
        return None
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return None


def _topic_of(ml_name: str | None) -> tuple[str | None, str | None, str | None]:
    """(tenant, tenant/namespace, persistent://tenant/ns/topic) of a managed-ledger name."""
    if not ml_name:
        return None, None, None
    parts = ml_name.split("/")
    if len(parts) != 4 or parts[2] != "persistent":
        return None, None, None
    tenant, ns, _, encoded = parts
    return tenant, f"{tenant}/{ns}", f"persistent://{tenant}/{ns}/{unquote_plus(encoded)}"


async def managed_ledger_topics(source: Source) -> dict[int, str]:
    """ledger id -> managed-ledger name, from every `ManagedLedgerInfo` (cursors skipped)."""
    out: dict[int, str] = {}
    root = paths.MANAGED_LEDGERS + "/"
    for path, raw in (await source.descendants(paths.MANAGED_LEDGERS, 4)).items():
        name = path.removeprefix(root)
        if name.split("/")[2] != "persistent":
            continue
        try:
            info = decode_managed_ledger_info(raw)
        except MetastoreError:
            continue  # a topic's record another tool wrote badly names no ledger
        for ledger in info.ledgers:
            out[ledger.ledger_id] = name
    return out


BOOKIE_INFO_CONCURRENCY = 16


async def bookie_disks(bookie_ids: Iterable[str], timeout: float
                       ) -> dict[str, tuple[int, int]]:
    """{bookie: (used, capacity)} bytes from each bookie's GET_BOOKIE_INFO answer; a bookie
    that cannot be reached or answers an error is left out."""
    gate = asyncio.Semaphore(BOOKIE_INFO_CONCURRENCY)
    found: dict[str, tuple[int, int]] = {}

    async def one(bookie: str) -> None:
        async with gate:
            try:
                async with asyncio.timeout(timeout):
                    async with await BookieClient.connect(bookie, timeout=timeout) as client:
                        total, free = await client.bookie_info()
            except Exception:  # unreachable, no V3, an error status, a bad id: unknown
                return
            if total > 0:
                found[bookie] = (max(0, total - free), total)

    await asyncio.gather(*(one(b) for b in bookie_ids))
    return found


async def bookies_table(source: Source, ensemble_ids: Iterable[str], *,
                        bookie_info: bool = True, timeout: float = 10.0) -> pa.Table:
    rack_config = decode_rack_config(await source.get(paths.BOOKIES_RACK_CONFIG))
    available = await source.descendants(paths.BOOKIES_AVAILABLE, 1)
    readonly = await source.descendants(paths.BOOKIES_READONLY, 1)
    reg = registrations_of([*available, *readonly])
    disks = await bookie_disks(sorted(reg.all), timeout) if bookie_info else {}
    placed: dict[str, tuple[str | None, dict[str, Any]]] = {}
    for group in sorted(rack_config):
        for bookie, info in rack_config[group].items():
            placed.setdefault(bookie, (group, info if isinstance(info, dict) else {}))
    ids = sorted(set(placed) | reg.all | set(ensemble_ids))
    rows = []
    for i, bookie in enumerate(ids):
        in_group, info = placed.get(bookie, (None, {}))
        found = info.get("rack")
        rack = found if isinstance(found, str) and found else None
        hostname = info.get("hostname") if isinstance(info.get("hostname"), str) else None
        rows.append({
            "bookie_index": i, "bookie_id": bookie, "registered": bookie in reg.all,
            "read_only": bookie in reg.read_only, "rack": rack,
            "region": region_of(rack) if rack else UNKNOWN_REGION, "group": in_group,
            "hostname": hostname,
            "disk_used": disks[bookie][0] if bookie in disks else None,
            "disk_capacity": disks[bookie][1] if bookie in disks else None,
        })
    return pa.Table.from_pylist(rows, schema=TABLES["bookies"])


async def policies_table(source: Source) -> pa.Table:
    """One row per namespace (every one with policies or local policies): its bookie
    affinity groups (null when it has none of its own: the broker-wide config applies) and
    its persistence policy (null when unset)."""
    policies = await source.descendants(paths.TENANTS, 2)
    local = await source.descendants(paths.LOCAL_POLICIES, 2)
    names = {p.removeprefix(root + "/") for root, found in ((paths.TENANTS, policies),
                                                            (paths.LOCAL_POLICIES, local))
             for p in found}
    rows = []
    for name in sorted(n for n in names if n.count("/") == 1):
        affinity = None
        local_path = paths.join(paths.LOCAL_POLICIES, name)
        if local_path in local:
            try:
                affinity = decode_local_policies(local_path, local[local_path]).bookie_affinity
            except MetastoreError as exc:
                raise SnapshotSourceError(f"{local_path}: {exc}") from None
        persistence = None
        ns_path = paths.join(paths.TENANTS, name)
        if ns_path in policies:
            try:
                persistence = decode_policies(ns_path, policies[ns_path]).persistence
            except MetastoreError as exc:
                raise SnapshotSourceError(f"{ns_path}: {exc}") from None
        rows.append({
            "namespace": name,
            "primary_groups": None if affinity is None else list(affinity.primary),
            "secondary_groups": None if affinity is None else list(affinity.secondary),
            "strict": None if affinity is None else bool(affinity.strict),
            "ensemble_size": None if persistence is None else persistence.ensemble_size,
            "write_quorum": None if persistence is None else persistence.write_quorum,
            "ack_quorum": None if persistence is None else persistence.ack_quorum,
        })
    return pa.Table.from_pylist(rows, schema=TABLES["policies"])


def config_table(cfg: PlacementConfig) -> pa.Table:
    return pa.Table.from_pylist([{
        "placement_mode": cfg.mode.value, "min_racks": cfg.min_num_racks_per_write_quorum,
        "enforce_min_racks": cfg.enforce_min_num_racks_per_write_quorum,
        "strict_bookie_affinity": cfg.strict_bookie_affinity_enabled,
        "isolation_groups": list(cfg.isolation_groups),
        "secondary_isolation_groups": list(cfg.secondary_isolation_groups),
        "regions_to_write": list(cfg.regions_to_write),
        "min_regions": cfg.minimum_regions_for_durability,
    }], schema=TABLES["config"])


Progress = Callable[[int, float], None]


async def collect(source: Source, cfg: PlacementConfig, *, page_size: int = 500,
                  concurrency: int = 4, progress: Progress | None = None,
                  bookie_info: bool = True, timeout: float = 10.0) -> dict[str, pa.Table]:
    """The five tables of `source`'s cluster."""
    started = time.perf_counter()
    topics = await managed_ledger_topics(source)
    acc = _Ledgers()
    async for page in source.ledger_pages(page_size, concurrency):
        decoded = []
        for ledger_id, raw in page:
            try:
                decoded.append(decode_ledger_metadata(ledger_id, raw))
            except MetastoreError as exc:
                raise SnapshotSourceError(f"{paths.ledger(ledger_id)}: {exc}") from None
        acc.add(decoded, topics)
        if progress is not None:
            progress(acc.count, time.perf_counter() - started)
    provisional = list(acc.seen)
    bookies = await bookies_table(source, provisional, bookie_info=bookie_info,
                                  timeout=timeout)
    final = {b: i for i, b in enumerate(bookies.column("bookie_id").to_pylist())}
    remap = np.array([final[b] for b in provisional] or [0], np.int32)
    ledgers = pa.Table.from_batches(acc.ledgers, schema=TABLES["ledgers"])
    fragments = pa.Table.from_batches([_fragment_batch(f, remap) for f in acc.fragments],
                                      schema=TABLES["fragments"])
    order = np.argsort(ledgers.column("ledger_id").to_numpy(), kind="stable")
    ledgers = ledgers.take(pa.array(order))
    fragments = with_ledger_columns(
        fragments.sort_by([("ledger_id", "ascending"), ("segment", "ascending")]), ledgers)
    return {"ledgers": ledgers, "fragments": fragments, "bookies": bookies,
            "policies": await policies_table(source), "config": config_table(cfg)}


def with_ledger_columns(fragments: pa.Table, ledgers: pa.Table) -> pa.Table:
    """`fragments` with its ledger's LEDGER_COLUMNS on every row (both sorted by ledger id),
    so the audit judges them without a join."""
    ids = ledgers.column("ledger_id").to_numpy()
    at = pa.array(np.searchsorted(ids, fragments.column("ledger_id").to_numpy()))
    for f in LEDGER_COLUMNS:
        fragments = fragments.append_column(
            f, ledgers.column(f.name.removeprefix("ledger_")).take(at))
    return fragments


def _fragment_batch(frag: dict[str, list[Any]], remap: np.ndarray[Any, Any]) -> pa.RecordBatch:
    ensembles = frag["ensemble"]
    lengths = np.fromiter((len(e) for e in ensembles), np.int32, len(ensembles))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    flat = np.fromiter((b for e in ensembles for b in e), np.int32, int(offsets[-1]))
    schema = TABLES["fragments"]
    arrays = [pa.array(frag[name], schema.field(name).type) for name in schema.names[:-1]]
    arrays.append(pa.ListArray.from_arrays(pa.array(offsets), pa.array(remap[flat])))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


async def snapshot(url: str, out: Path, cfg: PlacementConfig, *, page_size: int = 500,
                   concurrency: int = 4, progress: Progress | None = None,
                   timeout: float = 10.0, bookie_info: bool = True) -> dict[str, int]:
    """Read the cluster at `url` and write its snapshot under `out`; row counts."""
    source = open_source(url, timeout=timeout)
    try:
        tables = await collect(source, cfg, page_size=page_size, concurrency=concurrency,
                               progress=progress, bookie_info=bookie_info, timeout=timeout)
    except MetastoreError as exc:
        raise SnapshotSourceError(f"metadata store {url}: {exc}") from None
    except SnapshotSourceError:
        raise
    except Exception as exc:  # kazoo's and the etcd client's own errors
        if type(exc).__module__.startswith(("kazoo", "aetcd", "grpc")):
            raise SnapshotSourceError(f"metadata store {url}: {type(exc).__name__}: "
                                      f"{exc}") from None
        raise
    finally:
        with contextlib.suppress(Exception):  # closing a store that never answered
            await source.close()
    out.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        write_table(out / name, table, together="ledger_id" if name == "fragments" else None)
    return {name: table.num_rows for name, table in tables.items()}


# -- command line ------------------------------------------------------------------------------


class _Progress:
    """`N ledgers (rate/s)` on stderr: rewritten in place on a terminal, else every 2 s."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = -1e9  # the first page is always reported

    def __call__(self, count: int, elapsed: float) -> None:
        if not self.tty and elapsed - self.last < 2.0:
            return
        self.last = elapsed
        line = f"snapshot: {count} ledgers read ({count / max(elapsed, 1e-9):.0f}/s)"
        print(f"\r{line}" if self.tty else line, end="" if self.tty else "\n",
              file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.snapshot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metadata-store-url",
                        help="etcd:http://h:p[,h:p] or zk:h:p[,h:p] (default: metadataStoreUrl "
                             "of --config)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--config", type=Path, help="broker.conf with the placement settings")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker.conf key, overriding --config (repeatable)")
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=4,
                        help="pages of ledger metadata read at once (default 4)")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--no-bookie-info", action="store_true",
                        help="do not ask the registered bookies for their disk figures "
                             "(GET_BOOKIE_INFO): disk columns null")
    args = parser.parse_args(argv)
    try:
        conf = parse_broker_conf(args.config.read_text(), str(args.config)) if args.config else {}
        for item in args.set:
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"--set {item!r}: expected KEY=VALUE")
            conf[key.strip()] = value.strip()
        cfg = PlacementConfig.from_broker_conf(conf)
        url = args.metadata_store_url or conf.get("metadataStoreUrl")
        if not url:
            raise ValueError("no metadata store: give --metadata-store-url or metadataStoreUrl "
                             "in --config")
        if args.page_size < 1 or args.concurrency < 1:
            raise ValueError("--page-size and --concurrency must be at least 1")
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    progress = _Progress()
    try:
        counts = asyncio.run(snapshot(url, args.out, cfg, page_size=args.page_size,
                                      concurrency=args.concurrency, progress=progress,
                                      timeout=args.timeout,
                                      bookie_info=not args.no_bookie_info))
    except SnapshotSourceError as exc:
        if progress.tty:
            print(file=sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - started
    if progress.tty:
        print(file=sys.stderr)
    print(f"snapshot: {counts['ledgers']} ledgers, {counts['fragments']} fragments, "
          f"{counts['bookies']} bookies in {seconds:.1f}s -> {args.out}", file=sys.stderr)
    print(json.dumps({**counts, "seconds": round(seconds, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
