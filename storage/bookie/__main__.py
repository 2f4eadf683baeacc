"""`python -m storage.bookie --bookie-id HOST:PORT --data-dir DIR --metadata-store-url URL`.

The store is Pulsar's `metadataStoreUrl` (`etcd:...`, `zk:h:p[/chroot]`) or BookKeeper's
`metadataServiceUri` (`--metadata-service-uri` or `-c metadataServiceUri=...`:
`metadata-store:zk:h:p/ledgers`, `zk+hierarchical://h:p;h:p/ledgers`; `metastore.store_url`).

Only parses flags; `service.run` does the rest. `-c NAME=VALUE` sets any BookKeeper setting the
bookie knows (journalMaxGroupWaitMSec, journalFlushWhenQueueEmpty, dbStorage_writeCacheMaxSizeMb,
flushInterval, diskUsageThreshold, diskCheckInterval, ...).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from javaformats import InvalidCookie
from metastore.store_url import parse_metadata_service_uri, parse_store_url
from storage.bookie.bookie import BookieSettings
from storage.bookie.service import ServiceSettings, apply_overrides, run
from storage.runtime import GC_DEFAULT, GC_MODES, set_gc

SERVER_EXCEPTION = 2  # org.apache.bookkeeper.bookie.ExitCode


def parse(argv: list[str]) -> ServiceSettings:
    return parse_command(argv)[0]


def parse_command(argv: list[str]) -> tuple[ServiceSettings, str]:
    """The bookie's settings and the `--python-gc` mode."""
    parser = argparse.ArgumentParser(prog="python -m storage.bookie")
    parser.add_argument("--bookie-id", required=True, help="HOST:PORT, also the listen address")
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--metadata-store-url", help="etcd:http://host:port or zk:host:port")
    parser.add_argument("--metadata-service-uri",
                        help="metadata-store:zk:host:port/ledgers or "
                             "zk+hierarchical://host:port/ledgers")
    parser.add_argument("--lease-ttl", type=int, default=30, help="registration lease, seconds")
    parser.add_argument(
        "--python-gc", choices=GC_MODES, default=GC_DEFAULT,
        help="CPython's cyclic GC in this process (storage.runtime.set_gc): default (CPython's), "
        "freeze, freeze-lazy (the default), off (bench experiments only)",
    )
    parser.add_argument(
        "-c", "--conf", action="append", default=[], metavar="NAME=VALUE",
        help="a BookKeeper setting, e.g. journalMaxGroupWaitMSec=1",
    )  # fmt: skip
    args = parser.parse_args(argv)
    host, sep, port = args.bookie_id.rpartition(":")
    if not sep or not host or not port.isdigit():
        parser.error(f"--bookie-id must be HOST:PORT, got {args.bookie_id!r}")
    overrides = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--conf expects NAME=VALUE, got {item!r}")
        overrides[key.strip()] = value.strip()
    service_uri = overrides.pop("metadataServiceUri", None) or args.metadata_service_uri
    if (service_uri is None) == (args.metadata_store_url is None):
        parser.error("give one of --metadata-store-url and --metadata-service-uri "
                     "(or -c metadataServiceUri=...)")
    try:
        store_url = (parse_store_url(args.metadata_store_url) if service_uri is None
                     else parse_metadata_service_uri(service_uri))
    except ValueError as exc:
        parser.error(str(exc))
    settings = ServiceSettings(
        bookie_id=args.bookie_id,
        storage=BookieSettings(data_dir=args.data_dir),
        metadata_store_url=store_url.url,
        lease_ttl=args.lease_ttl,
    )
    try:
        return apply_overrides(settings, overrides), args.python_gc
    except ValueError as exc:
        parser.error(str(exc))


def main(argv: list[str] | None = None) -> None:
    settings, gc_mode = parse_command(sys.argv[1:] if argv is None else argv)
    set_gc(gc_mode)
    # The journal and flush threads hold the GIL only between their system calls (and the
    # checkpoint's record building); a 1 ms switch interval instead of 5 ms bounds how long
    # the event loop can wait for it while a checkpoint runs.
    sys.setswitchinterval(0.001)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")

    async def start() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run(settings, stop)

    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        runner = asyncio.run
    else:
        runner = uvloop.run
    try:
        runner(start())
    except InvalidCookie as exc:  # as BookKeeper's Main: logged, exit code SERVER_EXCEPTION
        logging.getLogger("storage.bookie").error(
            "Failed to build bookie server: BookieException$InvalidCookieException: %s", exc)
        sys.exit(SERVER_EXCEPTION)


if __name__ == "__main__":
    main()
