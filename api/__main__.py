"""`python -m api`: the admin service, with its own supervised etcd when no store is given.

python -m api tokens ...   (Pulsar's `pulsar tokens`: see api/auth/tokens.py)
python -m api [--port 8080] [--host 0.0.0.0] [--config broker.conf]
              [--metadata-store-url etcd:http://h:p[,h:p] | zk:h:p[,h:p][/chroot]]
              [--data-dir data]
              [--cluster-name standalone] [--etcd-client-port 2379] [--etcd-peer-port 2380]
              [--bookies N] [--bookie-port 3181]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import socket
import ssl
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from api.app import create_server_app
from api.auth.client_certificates import ClientCertHttpProtocol
from api.http.connection_limits import http_protocol
from api.log_lines import LineFormatter
from api.settings import Settings, SettingsError, load_settings
from metastore.embedded import EmbeddedEtcd, EtcdSupervisor, free_port
from metastore.store import open_metadata_store
from metastore.store_url import ZooKeeperUrl, parse_store_url
from storage import (
    FIRST_PORT,
    FRAME_LIMIT_KEY,
    GC_DEFAULT,
    LocalBookies,
    check_bookie_settings,
    default_ports,
    ports_for,
    set_gc,
    wait_registered,
)

log = logging.getLogger("api")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m api", description=__doc__.splitlines()[0])
    parser.add_argument("--port", help="webServicePort (default 8080)")
    parser.add_argument("--host", help="bindAddress (default 0.0.0.0)")
    parser.add_argument("--config", type=Path, help="broker.conf-style key=value file")
    parser.add_argument(
        "--metadata-store-url", help="etcd:http://host:port[,...] or zk:host:port[,...][/chroot]"
    )
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
    parser.add_argument(
        "--bookie-conf", action="append", default=[], metavar="NAME=VALUE",
        help="a BookKeeper setting for every supervised bookie (e.g. gcWaitTime=60000, "
        "majorCompactionThreshold=0.5); repeatable",
    )  # fmt: skip
    return parser.parse_args(argv)


def bookie_conf(items: list[str]) -> dict[str, str]:
    """`--bookie-conf NAME=VALUE` items as the supervisor's `-c` settings; each is checked
    against the bookie's own settings, so a bad one fails here rather than in every bookie."""
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"--bookie-conf expects NAME=VALUE, got {item!r}")
        conf[key.strip()] = value.strip()
    try:
        check_bookie_settings(conf)
    except ValueError as exc:
        raise SettingsError(f"--bookie-conf: {exc}") from exc
    return conf


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


def configure_logging(settings: Settings | None = None) -> None:
    """One format for our lines and uvicorn's; uvicorn's own start-up chatter stays quiet
    (the "ready" line says everything), its access log (`uvicorn.access`, uvicorn's format:
    `client - "METHOD path HTTP/1.1" status`) is on unless accessLogEnabled=false."""
    handler = logging.StreamHandler()
    handler.setFormatter(LineFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[handler])
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
        + (
            f", tls https://{shown}:{settings.webServicePortTls}"
            if settings.webServicePortTls
            else ""
        )
        + (f", bookies {' '.join(bookies)}" if bookies else "")
    )


class TlsServer(uvicorn.Server):
    """The `webServicePortTls` listener: the same app, started and stopped by the plain
    server (which runs the app's lifespan and owns the signals)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ReadyServer(uvicorn.Server):
    """uvicorn's server that logs one "ready" line once it (and its TLS companion) listen
    and `before_ready` (the supervised bookies' registration) is done."""

    def __init__(
        self,
        config: uvicorn.Config,
        ready: str,
        companion: uvicorn.Server | None = None,
        before_ready: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(config)
        self.ready = ready
        self.companion = companion
        self.companion_task: asyncio.Task[None] | None = None
        self.before_ready = before_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.companion is not None:
            companion = self.companion
            self.companion_task = asyncio.create_task(companion.serve(), name="tls listener")
            while not companion.started and not self.companion_task.done():
                await asyncio.sleep(0.01)
            if not companion.started:
                self.should_exit = True
                return
        if self.started and self.before_ready is not None:
            waiting = asyncio.ensure_future(self.before_ready())
            while not waiting.done() and not self.should_exit:  # a SIGTERM ends the wait
                await asyncio.wait({waiting}, timeout=0.05)
            if not waiting.done():
                waiting.cancel()
                return
            waiting.result()
        if self.started:
            log.info("%s", self.ready)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.companion is not None and self.companion_task is not None:
            self.companion.should_exit = True
            with contextlib.suppress(Exception):
                await self.companion_task
        await super().shutdown(sockets)


BOOKIE_REGISTRATION_WAIT = 60.0  # s: a journal replay of a large bookie takes a while


async def bookies_registered(settings: Settings, bookie_ids: list[str]) -> None:
    """Wait (bounded) until the supervised bookies registered, so that the ready line means
    they take writes; a bookie still missing after the bound is named in a warning."""
    store = open_metadata_store(settings.metadataStoreUrl)
    try:
        missing = await wait_registered(store, bookie_ids, BOOKIE_REGISTRATION_WAIT)
    finally:
        await store.close()
    if missing:
        log.warning(
            "bookies not registered after %.0f s: %s (see their logs under %s)",
            BOOKIE_REGISTRATION_WAIT, " ".join(missing), settings.dataDir,
        )  # fmt: skip


def forwarded(settings: Settings) -> dict[str, Any]:
    """uvicorn's proxy-header settings: X-Forwarded-For honoured, from any peer, only with
    `webServiceTrustXForwardedFor=true` (uvicorn would otherwise trust it from 127.0.0.1)."""
    if settings.webServiceTrustXForwardedFor:
        return {"proxy_headers": True, "forwarded_allow_ips": "*"}
    return {"proxy_headers": False}


def keep_alive(settings: Settings) -> int:
    """uvicorn's keep-alive timeout: the idle timeout between requests (a very long one for
    `<= 0`, which uvicorn has no form for)."""
    idle = settings.httpServerIdleTimeoutSeconds
    return max(1, round(idle)) if idle > 0 else 365 * 24 * 3600


def tls_config(app: ASGIApp, settings: Settings) -> uvicorn.Config | None:
    """uvicorn's config for `webServicePortTls` (None when it is 0): the certificate and key
    of `tlsCertificateFilePath`/`tlsKeyFilePath`; client certificates checked against
    `tlsTrustCertsFilePath` when given, required with tlsRequireTrustedClientCertOnConnect."""
    if not settings.webServicePortTls:
        return None
    cert_reqs = ssl.CERT_NONE
    if settings.tlsTrustCertsFilePath:
        cert_reqs = ssl.CERT_OPTIONAL
    if settings.tlsRequireTrustedClientCertOnConnect:
        cert_reqs = ssl.CERT_REQUIRED
    return uvicorn.Config(
        app,
        host=settings.bindAddress,
        port=settings.webServicePortTls,
        http=http_protocol(settings.connection_limits, ClientCertHttpProtocol),
        timeout_keep_alive=keep_alive(settings),
        backlog=settings.httpServerAcceptQueueSize,
        **forwarded(settings),
        lifespan="off",
        access_log=settings.accessLogEnabled,
        log_config=None,
        log_level=None,
        ssl_certfile=settings.tlsCertificateFilePath,
        ssl_keyfile=settings.tlsKeyFilePath,
        ssl_ca_certs=settings.tlsTrustCertsFilePath or None,
        ssl_cert_reqs=cert_reqs,
    )


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["tokens"]:  # `pulsar tokens`: no server, no logging set-up
        from api.auth.tokens import run as run_tokens

        return run_tokens(arguments[1:])
    configure_logging()
    try:
        args = parse_args(arguments)
        settings = settings_from_args(args)
        conf = bookie_conf(args.bookie_conf)
        # the supervised bookies take the frames the service sends (Pulsar's bookkeeper.conf
        # sets nettyMaxFrameSizeBytes to maxMessageSize + the frame padding likewise)
        conf.setdefault(FRAME_LIMIT_KEY, str(settings.bookie_frame_limit))
    except (SettingsError, OSError) as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    # uvicorn re-raises SIGTERM after its graceful shutdown; turn it into SystemExit so the
    # `finally` below still stops the embedded etcd.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    supervisor = None
    if settings.metadataStoreUrl:
        try:
            named = parse_store_url(settings.metadataStoreUrl)
        except ValueError as exc:
            print(f"configuration error: {exc}", file=sys.stderr)
            return 2
        etcd_text = settings.metadataStoreUrl.removeprefix("etcd:")
        if isinstance(named, ZooKeeperUrl):
            etcd_text = f"none (ZooKeeper {named.url})"
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
            conf=conf,
        )
        bookies.start()
    app = create_server_app(settings, bookies)
    # everything built so far (modules, the app, its routes and models: ~70k objects) out of
    # the collector's reach, and a young generation the in-flight requests and ledger adds die
    # in: full collections otherwise stall the event loop 15-95 ms several times a second
    # under write load (BENCHMARKS.md, ledger tail pass)
    set_gc(GC_DEFAULT)
    config = uvicorn.Config(
        app,
        host=settings.bindAddress,
        port=settings.webServicePort,
        http=http_protocol(settings.connection_limits),
        timeout_keep_alive=keep_alive(settings),
        backlog=settings.httpServerAcceptQueueSize,
        **forwarded(settings),
        access_log=settings.accessLogEnabled,
        log_config=None,
        log_level=None,
    )
    tls = tls_config(app, settings)
    configure_logging(settings)
    try:
        ready = ready_line(settings, etcd_text, bookies.bookie_ids if bookies else None)
        before_ready = (
            None if bookies is None else lambda: bookies_registered(settings, bookies.bookie_ids)
        )
        companion = TlsServer(tls) if tls is not None else None
        ReadyServer(config, ready, companion, before_ready).run()
    finally:
        if bookies is not None:
            bookies.stop()
        if supervisor is not None:
            supervisor.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
