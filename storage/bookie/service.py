"""One bookie process: storage, TCP server, registration and disk check, started and stopped
in order. `run` returns when `stop` is set (SIGTERM/SIGINT in `__main__`).

Statistics (`StatsSettings`, BookKeeper's keys): with `enableStatistics` (default true, as
upstream) the request handler and the journal record `storage.bookie.metrics`; with
`prometheusStatsHttpPort` > 0 they are served in the Prometheus text format at
`http://<prometheusStatsHttpAddress>:<port>/metrics` from a thread of this process. Upstream's
port defaults to 8000; here 0 (no HTTP server) is the default of a bare
`python -m storage.bookie`, because several bookies share a machine in every local set-up:
the supervisor (`storage.supervisor`) gives each of its bookies a free port. The address
defaults to the bookie's own host. As upstream, the port is not part of the registration
(`BookieServiceInfo` lists the `bookie-rpc` endpoint, and `httpserver` only for the HTTP
admin server, which these bookies do not run)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, fields, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from metastore.ledger_metadata import LedgerMetadata
from metastore.ledgers import LedgerMetadataStore
from metastore.repositories.underreplication import UnderReplication
from metastore.store import open_metadata_store
from metastore.versioned_keys import VersionedKeys
from storage.bookie.bookie import Bookie, BookieSettings
from storage.bookie.connections import ConnectionLimits
from storage.bookie.cookie import check_cookies
from storage.bookie.gc import (
    GarbageCollector,
    GcSettings,
    publish_gc_state,
    watch_force_requests,
)
from storage.bookie.metrics import BookieCollector, BookieGauges, BookieMetrics, render
from storage.bookie.protocol import MAX_FRAME_SIZE
from storage.bookie.registration import (
    DiskSettings,
    Registration,
    disk_usage,
    forced_readonly,
    next_readonly,
    watch_disk,
)
from storage.bookie.server import serve

log = logging.getLogger(__name__)


FRAME_LIMIT_KEY = "nettyMaxFrameSizeBytes"


@dataclass(frozen=True)
class ServerSettings:
    """The bookie port, under BookKeeper's names."""

    # longest frame accepted (its 4-byte length not counted); Pulsar's bookkeeper.conf value,
    # maxMessageSize + 10 KiB, so every message a broker accepts fits
    nettyMaxFrameSizeBytes: int = MAX_FRAME_SIZE
    # ours (BookKeeper has no such keys): storage.bookie.connections
    maxServerConnections: int = 1024
    serverIdleTimeoutSeconds: float = 300.0
    serverFrameTimeoutSeconds: float = 30.0

    @property
    def limits(self) -> ConnectionLimits:
        return ConnectionLimits(self.maxServerConnections, self.serverIdleTimeoutSeconds,
                                self.serverFrameTimeoutSeconds)


@dataclass(frozen=True)
class StatsSettings:
    enableStatistics: bool = True
    prometheusStatsHttpPort: int = 0  # upstream 8000; 0: no HTTP server (see above)
    prometheusStatsHttpAddress: str = ""  # "": the bookie's host


@dataclass(frozen=True)
class ServiceSettings:
    bookie_id: str
    storage: BookieSettings
    metadata_store_url: str
    disk: DiskSettings = field(default_factory=DiskSettings)
    gc: GcSettings = field(default_factory=GcSettings)
    stats: StatsSettings = field(default_factory=StatsSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    lease_ttl: int = 30  # s; Pulsar's metadataStoreSessionTimeoutMillis default is 30000

    @property
    def host(self) -> str:
        return self.bookie_id.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.bookie_id.rpartition(":")[2])


def apply_overrides(settings: ServiceSettings, overrides: dict[str, str]) -> ServiceSettings:
    """Apply BookKeeper setting names (`journalMaxGroupWaitMSec=2`, ...) to whichever part
    owns them; an unknown name is an error."""
    parts: dict[str, Any] = {
        "journal": settings.storage.journal,
        "storage": settings.storage,
        "disk": settings.disk,
        "gc": settings.gc,
        "stats": settings.stats,
        "server": settings.server,
    }
    changes: dict[str, dict[str, Any]] = {name: {} for name in parts}
    for key, raw in overrides.items():
        for name, part in parts.items():
            known = {f.name: f for f in fields(part)}
            if key in known and key not in ("journal", "data_dir"):
                changes[name][key] = _convert(raw, getattr(part, key))
                break
        else:
            raise ValueError(f"unknown setting {key!r}")
    journal = replace(settings.storage.journal, **changes["journal"])
    storage = replace(settings.storage, journal=journal, **changes["storage"])
    gc = replace(settings.gc, **changes["gc"])
    gc.validate()
    return replace(
        settings, storage=storage, disk=replace(settings.disk, **changes["disk"]), gc=gc,
        stats=replace(settings.stats, **changes["stats"]),
        server=replace(settings.server, **changes["server"]),
    )


def check_bookie_settings(overrides: dict[str, str]) -> None:
    """ValueError when a setting is unknown or its value does not fit (for whoever passes
    settings on to bookie processes)."""
    apply_overrides(
        ServiceSettings("127.0.0.1:1", BookieSettings(Path(".")), "etcd:http://127.0.0.1:1"),
        overrides,
    )


def _convert(raw: str, current: object) -> object:
    if isinstance(current, bool):
        if raw.lower() not in ("true", "false"):
            raise ValueError(f"expected true or false, got {raw!r}")
        return raw.lower() == "true"
    if isinstance(current, str):
        return raw
    if isinstance(current, int):
        return int(raw)
    return float(raw)


def serve_metrics(settings: ServiceSettings, bookie: Bookie,
                  metrics: BookieMetrics) -> Callable[[], None] | None:
    """Start the metrics HTTP server (a thread) when a port is set; the function that stops
    it. A port that cannot be bound is logged, not fatal: the bookie's data matters more."""
    port = settings.stats.prometheusStatsHttpPort
    if port <= 0:
        return None
    collector = BookieCollector(metrics, BookieGauges(
        writable=lambda: not bookie.readonly,
        ledgers=lambda: bookie.ledger_count,
        write_cache_bytes=lambda: bookie.write_cache_size,
        journal_queue=lambda: bookie.journal.queue_size,
    ))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = render(collector.collect())
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # no line per scrape

    address = settings.stats.prometheusStatsHttpAddress or settings.host
    try:
        server = ThreadingHTTPServer((address, port), Handler)
    except OSError as exc:
        log.error("metrics not served: cannot listen on %s:%d: %s", address, port, exc)
        return None
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
    thread.start()
    log.info("metrics at http://%s:%d/metrics", address, port)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return stop


async def run(settings: ServiceSettings, stop: asyncio.Event) -> None:
    # on ZooKeeper the registration's session times out as its etcd lease would
    store = open_metadata_store(settings.metadata_store_url, session_timeout=settings.lease_ttl)
    keys = VersionedKeys.of(store)
    try:
        await check_cookies(keys, settings.bookie_id, [settings.storage.journal_dir.parent],
                            [settings.storage.ledger_dir.parent])
    except BaseException:
        await keys.close()
        await store.close()
        raise
    bookie = Bookie(settings.storage)
    await bookie.open()
    log.info("journal replayed: %d entries", bookie.replayed)
    metrics = BookieMetrics() if settings.stats.enableStatistics else None
    bookie.journal.metrics = metrics
    stop_metrics = serve_metrics(settings, bookie, metrics) if metrics is not None else None
    server = await serve(bookie, settings.host, settings.port, metrics,
                         max_frame=settings.server.nettyMaxFrameSizeBytes,
                         limits=settings.server.limits)
    registration = Registration(store, settings.bookie_id, settings.lease_ttl)
    data_dir = settings.storage.data_dir
    bookie.readonly = next_readonly(
        settings.disk, disk_usage(data_dir), False, forced_readonly(data_dir)
    )
    wake = asyncio.Event()  # SIGUSR1: check the disk (and the force-readonly flag) now
    with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, wake.set)

    async def switch(readonly: bool) -> None:
        bookie.readonly = readonly
        await registration.set_readonly(readonly)

    collector = GarbageCollector(
        bookie, settings.gc, MetadataLedgers(LedgerMetadataStore(keys), settings.bookie_id),
        settings.disk, data_dir, settings.bookie_id,
    )

    publishing = asyncio.Lock()

    async def publish(_: bool) -> None:
        # One put at a time, each of the state as it is then: the last put is the last state.
        async with publishing:
            await publish_gc_state(store, settings.bookie_id, collector.in_force_gc)

    collector.listeners.append(publish)
    tasks: list[asyncio.Task[None]] = []
    try:
        await registration.start(bookie.readonly)
        loop = asyncio.get_running_loop()
        tasks.append(loop.create_task(
            watch_disk(settings.disk, data_dir, lambda: bookie.readonly, switch, wake)
        ))
        tasks.append(loop.create_task(collector.run_forever(), name="gc"))
        tasks.append(loop.create_task(watch_force_requests(store, collector)))
        tasks.append(loop.create_task(_publish_idle(publish)))
        state = "read-only" if bookie.readonly else "writable"
        log.info("bookie %s ready (%s)", settings.bookie_id, state)
        await stop.wait()
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        collector.close()
        with contextlib.suppress(Exception):
            await registration.stop()
        server.close()
        if stop_metrics is not None:
            stop_metrics()
        await bookie.close()
        await keys.close()
        await store.close()


async def _publish_idle(publish: Callable[[bool], Awaitable[None]]) -> None:
    """`is_in_force_gc: false` at start (a state left by a previous run is stale)."""
    try:
        await publish(False)
    except Exception as exc:
        log.warning("publishing the GC state failed: %s", exc)


class MetadataLedgers:
    """`gc.LedgerSource` on the metadata store: the ledger keys, and the under-replication
    locks (BookKeeper's `/ledgers/underreplication/locks/urL<id>`, on a lease of this
    process) that over-replicated GC takes."""

    LOCK_LEASE_TTL = 60
    LOCK_LEASE_RENEW = 20.0

    def __init__(self, ledgers: LedgerMetadataStore, holder: str = "") -> None:
        self.ledgers = ledgers
        self.holder = holder
        self._lease: int | None = None
        self._lease_at = 0.0

    def ledger_ids(self) -> AsyncIterator[int]:
        return self.ledgers.ledger_ids()

    async def exists(self, ledger_id: int) -> bool:
        return await self.ledgers.get(ledger_id) is not None

    async def read(self, ledger_id: int) -> LedgerMetadata | None:
        found = await self.ledgers.get(ledger_id)
        return None if found is None else found.metadata

    async def lock(self, ledger_id: int) -> bool:
        keys = self.ledgers.keys
        if self._lease is None or time.monotonic() - self._lease_at > self.LOCK_LEASE_RENEW:
            self._lease = await keys.grant_lease(self.LOCK_LEASE_TTL)
            self._lease_at = time.monotonic()
        return await UnderReplication(keys).lock(ledger_id, self._lease, self.holder)

    async def unlock(self, ledger_id: int) -> None:
        await UnderReplication(self.ledgers.keys).unlock(ledger_id)
