"""The value of a bookie's registration key, `/ledgers/available/<bookieId>` (and
`/ledgers/available/readonly/<bookieId>`): BookKeeper's `BookieServiceInfoFormat` protobuf,
binary, no header, as Pulsar's `BookieServiceInfoSerde` writes it on etcd.

    BookieServiceInfoFormat
      6: repeated Endpoint {1 id, 2 port, 3 host, 4 protocol, 5 repeated auth,
                            6 repeated extensions}
      7: map<string, string> properties

A real bookie publishes one endpoint `id="bookie", protocol="bookie-rpc"` for its BookKeeper
port (extension `"tls"` when TLS is on) and, with its HTTP server on, one
`id="httpserver", protocol="http"`. Readers treat an empty value as a legacy registration and
derive a single `bookie-rpc` endpoint from the id (`host:port`), as BookKeeper's registration
client does. Properties are written sorted by key (Java writes its map's iteration order, which
no reader depends on).

Pure: no I/O and no etcd client, so any process (a Spark worker included) can decode a
registration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError

from metastore.errors import MetadataFormatError
from metastore.proto.bookkeeper_formats_pb2 import BookieServiceInfoFormat

BOOKIE_RPC = "bookie-rpc"
"""Protocol of the BookKeeper endpoint (endpoint id `bookie`)."""
HTTP = "http"
"""Protocol of the bookie's HTTP admin endpoint (endpoint id `httpserver`)."""
BOOKIE_ENDPOINT_ID = "bookie"
HTTP_ENDPOINT_ID = "httpserver"


@dataclass(frozen=True)
class ServiceEndpoint:
    """One service a bookie offers."""

    id: str
    host: str
    port: int
    protocol: str
    auth: tuple[str, ...] = ()
    extensions: tuple[str, ...] = ()


@dataclass(frozen=True)
class BookieServiceInfo:
    """What a bookie registration says: its endpoints in order, and free-form properties."""

    endpoints: tuple[ServiceEndpoint, ...]
    properties: Mapping[str, str] = field(default_factory=dict)

    def endpoint(self, endpoint_id: str) -> ServiceEndpoint | None:
        """The endpoint with this id (`"bookie"`, `"httpserver"`), if published."""
        return next((e for e in self.endpoints if e.id == endpoint_id), None)


def bookie_service_info(
    host: str,
    port: int,
    *,
    http_port: int | None = None,
    http_host: str | None = None,
    tls: bool = False,
    properties: Mapping[str, str] | None = None,
) -> BookieServiceInfo:
    """What a real bookie at `host:port` publishes: the `bookie-rpc` endpoint and, when its
    HTTP server runs, the `http` endpoint."""
    endpoints = [
        ServiceEndpoint(
            BOOKIE_ENDPOINT_ID, host, port, BOOKIE_RPC, extensions=("tls",) if tls else ()
        )
    ]
    if http_port is not None:
        endpoints.append(ServiceEndpoint(HTTP_ENDPOINT_ID, http_host or host, http_port, HTTP))
    return BookieServiceInfo(tuple(endpoints), dict(properties or {}))


def legacy_bookie_service_info(bookie_id: str) -> BookieServiceInfo:
    """The registration a reader assumes for an empty value: one `bookie-rpc` endpoint whose
    id is the bookie id and whose host and port come from it. `MetadataFormatError` when the
    id is not `host:port`."""
    parts = bookie_id.split(":")
    if len(parts) < 2 or not parts[0] or not parts[1].isdigit():
        raise MetadataFormatError(
            "bookie registration", f"empty value and bookie id {bookie_id!r} is not host:port"
        )
    return BookieServiceInfo((ServiceEndpoint(bookie_id, parts[0], int(parts[1]), BOOKIE_RPC),))


def encode_bookie_service_info(info: BookieServiceInfo) -> bytes:
    """The registration value, byte for byte as Pulsar's serde writes it (properties sorted).
    No endpoints and no properties encode to `b""`, which readers take as legacy."""
    message = BookieServiceInfoFormat()
    for endpoint in info.endpoints:
        message.endpoints.add(
            id=endpoint.id,
            port=endpoint.port,
            host=endpoint.host,
            protocol=endpoint.protocol,
            auth=list(endpoint.auth),
            extensions=list(endpoint.extensions),
        )
    for key in sorted(info.properties):
        message.properties[key] = info.properties[key]
    return message.SerializeToString(deterministic=True)


def decode_bookie_service_info(bookie_id: str, raw: bytes) -> BookieServiceInfo:
    """Parse the value of `bookie_id`'s registration key; an empty value is the legacy
    registration derived from the id. `MetadataFormatError` when it is not the protobuf."""
    if not raw:
        return legacy_bookie_service_info(bookie_id)
    message = BookieServiceInfoFormat()
    try:
        message.ParseFromString(raw)
    except DecodeError as exc:
        raise MetadataFormatError("bookie registration", str(exc)) from exc
    if not message.IsInitialized():  # proto2 required fields, as Java's parser demands
        raise MetadataFormatError("bookie registration", "an endpoint lacks a required field")
    return BookieServiceInfo(
        endpoints=_endpoints(message.endpoints),
        properties=dict(message.properties),
    )


def _endpoints(found: Sequence[BookieServiceInfoFormat.Endpoint]) -> tuple[ServiceEndpoint, ...]:
    return tuple(
        ServiceEndpoint(
            id=e.id,
            host=e.host,
            port=e.port,
            protocol=e.protocol,
            auth=tuple(e.auth),
            extensions=tuple(e.extensions),
        )
        for e in found
    )
