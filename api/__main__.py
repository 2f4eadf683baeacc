"""`python -m api`: the admin service, with its own supervised etcd when no store is given.

python -m api [--port 8080] [--host 0.0.0.0] [--config broker.conf]
              [--metadata-store-url etcd:http://h:p[,h:p]] [--data-dir data] [--bookies N]
"""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import sys
from pathlib import Path

import uvicorn

from api.app import create_server_app
from api.settings import Settings, SettingsError, load_settings
from metastore.embedded import EmbeddedEtcd, EtcdSupervisor
from storage.cluster import LocalBookies, default_ports

log = logging.getLogger("api")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m api", description=__doc__.splitlines()[0])
    parser.add_argument("--port", help="webServicePort (default 8080)")
    parser.add_argument("--host", help="bindAddress (default 0.0.0.0)")
    parser.add_argument("--config", type=Path, help="broker.conf-style key=value file")
    parser.add_argument("--metadata-store-url", help="etcd:http://host:port[,host:port]")
    parser.add_argument("--data-dir", help="where the embedded etcd keeps its data")
    parser.add_argument("--cluster-name", help="clusterName")
    parser.add_argument(
        "--bookies", type=int, default=0,
        help="start and supervise N local bookies (127.0.0.1:3181 upward, data under --data-dir)",
    )  # fmt: skip
    return parser.parse_args(argv)


def settings_from_args(args: argparse.Namespace) -> Settings:
    flags = {
        key: value
        for key, value in {
            "webServicePort": args.port,
            "bindAddress": args.host,
            "metadataStoreUrl": args.metadata_store_url,
            "dataDir": args.data_dir,
            "clusterName": args.cluster_name,
        }.items()
        if value is not None
    }
    return load_settings(args.config, flags=flags)


def freeze_startup_objects() -> None:
    """Move everything built so far (modules, the app, its routes and models: ~70k objects)
    out of the garbage collector's reach. Otherwise every full collection walks them all
    again, a 15-25 ms pause of the event loop every few seconds under write load."""
    gc.collect()
    gc.freeze()


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        settings = settings_from_args(args)
    except (SettingsError, OSError) as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    # uvicorn re-raises SIGTERM after its graceful shutdown; turn it into SystemExit so the
    # `finally` below still stops the embedded etcd.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    supervisor = None
    if not settings.metadataStoreUrl:
        etcd = EmbeddedEtcd(Path(settings.dataDir))
        supervisor = EtcdSupervisor(etcd)
        supervisor.start()
        settings = settings.with_overrides(metadataStoreUrl=etcd.url)
        log.info("started embedded etcd at %s (data in %s)", etcd.url, settings.dataDir)
    bookies = None
    if args.bookies > 0:
        bookies = LocalBookies(
            Path(settings.dataDir), settings.metadataStoreUrl, default_ports(args.bookies)
        )
        bookies.start()
        log.info("started %d local bookies: %s", args.bookies, ", ".join(bookies.bookie_ids))
    app = create_server_app(settings)
    freeze_startup_objects()
    try:
        uvicorn.run(
            app,
            host=settings.bindAddress,
            port=settings.webServicePort,
            log_level="warning",
            http="httptools",
            access_log=False,
        )
    finally:
        if bookies is not None:
            bookies.stop()
        if supervisor is not None:
            supervisor.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
