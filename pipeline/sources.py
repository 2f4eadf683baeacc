"""Where a snapshot reads from: a Pulsar metadata store by path, and the bookies themselves.

- `EtcdSource` (`etcd:http://h:p[,h:p]`): ours, or any Pulsar whose metadata store is etcd; a
  path is the etcd key, read in bounded, paged range reads (one keys-only page at a time finds
  each page's bounds, then up to `concurrency` pages of values are read at once, so a large
  export keeps at most `concurrency * page_size` values in flight and etcd never sees an
  unbounded range);
- `ZkSource` (`zk:host:2181[,host:2181][/chroot]`): a Pulsar on ZooKeeper, read with `kazoo`
  (same paths, same bytes; Pulsar's BookKeeper ledger layout there is the same hierarchical
  one);
- `bookie_disks`: each registered bookie's disk figures from BookKeeper's V3 GET_BOOKIE_INFO
  (the data file system's total and free bytes, as upstream's clients ask for disk-weighted
  placement), 16 at a time; a bookie that does not answer is left out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, Protocol

from metastore import paths
from storage.bookie_client import BookieClient

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


# -- bookies -----------------------------------------------------------------------------------


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
