"""`python -m api`: the admin service, with its own supervised etcd when no store is given.

python -m api [--port 8080] [--host 0.0.0.0] [--config broker.conf]
              [--metadata-store-url etcd:http://h:p[,h:p]] [--data-dir data]
              [--cluster-name standalone] [--etcd-client-port 2379] [--etcd-peer-port 2380]
              [--bookies N] [--bookie-port 3181]
"""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import socket
import sys
from pathlib import Path

import uvicorn

from api.app import create_server_app
from api.settings import Settings, SettingsError, load_settings
from metastore.embedded import EmbeddedEtcd, EtcdSupervisor, free_port
from storage.cluster import FIRST_PORT, LocalBookies, default_ports, ports_for

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
        "--etcd-client-port",
        help="embeddedEtcdClientPort: the embedded etcd's client port when free (default "
        "2379; 0: any free port)",
    )
    parser.add_argument(
        "--etcd-peer-port",
        help="embeddedEtcdPeerPort: the embedded etcd's peer port when free (default 2380; "
        "0: any free port)",
    )
    parser.add_argument(
        "--bookies", type=int, default=0,
        help="start and supervise N local bookies (127.0.0.1:3181 upward, data under --data-dir)",
    )  # fmt: skip
    parser.add_argument(
        "--bookie-port", type=int, default=FIRST_PORT,
        help="port of the first supervised bookie, the others follow it (default 3181; 0: "
        "the ports of the bookie data already under --data-dir when free, else free ports; "
        "the bookie ids follow the ports)",
    )  # fmt: skip
    return parser.parse_args(argv)


def bookie_ports(args: argparse.Namespace, data_dir: Path) -> list[int]:
    if args.bookie_port == 0:
        return ports_for(data_dir, args.bookies)
    return default_ports(args.bookies, args.bookie_port)


def settings_from_args(args: argparse.Namespace) -> Settings:
    flags = {
        key: value
        for key, value in {
            "webServicePort": args.port,
            "bindAddress": args.host,
            "metadataStoreUrl": args.metadata_store_url,
            "dataDir": args.data_dir,
            "clusterName": args.cluster_name,
            "embeddedEtcdClientPort": args.etcd_client_port,
            "embeddedEtcdPeerPort": args.etcd_peer_port,
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


def configure_logging(settings: Settings | None = None) -> None:
    """One format for our lines and uvicorn's; uvicorn's own start-up chatter stays quiet
    (the "ready" line says everything), its access log (`uvicorn.access`, uvicorn's format:
    `client - "METHOD path HTTP/1.1" status`) is on unless accessLogEnabled=false."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    if settings is not None:
        access = logging.WARNING if not settings.accessLogEnabled else logging.INFO
        logging.getLogger("uvicorn.access").setLevel(access)


def embedded_etcd(settings: Settings) -> EmbeddedEtcd:
    """The supervised etcd on its configured ports (2379/2380 by default) when they are free,
    else on free ports."""
    return EmbeddedEtcd(
        Path(settings.dataDir),
        client_port=port_if_free(settings.embeddedEtcdClientPort),
        peer_port=port_if_free(settings.embeddedEtcdPeerPort),
    )


def port_if_free(port: int) -> int:
    """`port` when nothing listens on it on 127.0.0.1, else (or for 0) a free port."""
    if port:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            # As etcd binds (Go sets SO_REUSEADDR): connections in TIME_WAIT do not count.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                log.info("port %d is taken; the embedded etcd uses a free port", port)
            else:
                return port
    return free_port()


def ready_line(settings: Settings, etcd: str, bookies: list[str] | None = None) -> str:
    host = settings.bindAddress
    shown = "localhost" if host in ("0.0.0.0", "::", "") else host
    base = f"http://{shown}:{settings.webServicePort}"
    return (
        f"ready: admin {base}/admin/v2, docs {base}/docs, openapi {base}/openapi.json, "
        f"cluster {settings.clusterName}, etcd {etcd}"
        + (f", bookies {' '.join(bookies)}" if bookies else "")
    )


class ReadyServer(uvicorn.Server):
    """uvicorn's server that logs one "ready" line once it listens."""

    def __init__(self, config: uvicorn.Config, ready: str) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            log.info("%s", self.ready)


def main(argv: list[str] | None = None) -> int:
    configure_logging()
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
    if settings.metadataStoreUrl:
        etcd_text = settings.metadataStoreUrl.removeprefix("etcd:")
    else:
        etcd = embedded_etcd(settings)
        supervisor = EtcdSupervisor(etcd)
        supervisor.start()
        settings = settings.with_overrides(metadataStoreUrl=etcd.url)
        etcd_text = f"{etcd.url.removeprefix('etcd:')} (embedded, data in {etcd.data_dir}/etcd)"
    bookies = None
    if args.bookies > 0:
        bookies = LocalBookies(
            Path(settings.dataDir),
            settings.metadataStoreUrl,
            bookie_ports(args, Path(settings.dataDir)),
        )
        bookies.start()
    app = create_server_app(settings, bookies)
    freeze_startup_objects()
    config = uvicorn.Config(
        app,
        host=settings.bindAddress,
        port=settings.webServicePort,
        http="httptools",
        access_log=settings.accessLogEnabled,
        log_config=None,
        log_level=None,
    )
    configure_logging(settings)
    try:
        ready = ready_line(settings, etcd_text, bookies.bookie_ids if bookies else None)
        ReadyServer(config, ready).run()
    finally:
        if bookies is not None:
            bookies.stop()
        if supervisor is not None:
            supervisor.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
