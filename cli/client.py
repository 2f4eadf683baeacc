"""The admin REST client: HTTP/1.1 over a plain socket underneath, Pulsar's error semantics
on top.

Every call goes to `<admin-url>/admin/v2/...` (or `/admin/...` for the one v1 path) with the
authentication headers of the configured plugin. An error status raises
`AdminError(status, reason)` with the server's `{"reason": ...}` (or `HTTP <code> <text>` when
the body is something else, as the Java client falls back to the JAX-RS message); no response
at all raises `ConnectError`. A 204 or empty body reads as `None`. Redirects are not followed.

Why not httpx, or even `http.client`: importing httpx costs more than twice the start-up of
the interpreter itself, `http.client` (with the `email` parser and `ssl` it pulls in) half of
it, and a `pulsar-admin` call is one or two requests, each on its own connection
(`Connection: close`): a request line, headers and a body out, a status line, headers and a
body (`Content-Length`, chunked or until close) back. `ssl` is imported only for an https
admin URL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote, urlencode, urlsplit

from cli.auth import auth_headers, tls_key_pair
from cli.config import ClientConfig
from cli.errors import AdminError, ConfigError, ConnectError

if TYPE_CHECKING:
    import socket
    import ssl

V2 = "/admin/v2"
NO_ADMIN_URL = "Can't find any admin url to use"
Params = Mapping[str, str | int | bool]
USER_AGENT = "pulsar-admin (pulsar-isolation)"


def segment(value: str) -> str:
    """One path segment, percent-encoded (`:` kept, as in `host:port`)."""
    return quote(value, safe=":@=-._~,")


def path(*segments: str) -> str:
    return "/" + "/".join(segment(s) for s in segments)


class Response(NamedTuple):
    status_code: int
    reason_phrase: str
    content: bytes
    headers: Mapping[str, str]

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


def reason_of(response: Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("reason") is not None:
        return str(body["reason"])
    try:
        phrase = HTTPStatus(response.status_code).phrase
    except ValueError:
        phrase = response.reason_phrase
    return f"HTTP {response.status_code} {phrase}"


def tls_verification(config: ClientConfig) -> ssl.SSLContext:
    """The Java client's defaults: verify the chain, hostname check only when enabled; the
    client certificate of `AuthenticationTls` (or client.conf's `tlsCertificateFilePath` and
    `tlsKeyFilePath`) presented when the server asks for one."""
    import ssl

    try:
        context = ssl.create_default_context(cafile=config.tls_trust_cert_path)
    except OSError as exc:
        raise ConfigError(
            f"Failed to load tlsTrustCertsFilePath {config.tls_trust_cert_path}: {exc}"
        ) from exc
    context.check_hostname = config.tls_enable_hostname_verification
    if config.tls_allow_insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    pair = tls_key_pair(config.auth_plugin, config.auth_params)
    if pair is None and config.tls_cert_file and config.tls_key_file:
        pair = (config.tls_cert_file, config.tls_key_file)
    if pair is not None:
        try:
            context.load_cert_chain(*pair)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"Failed to load the TLS client certificate {pair[0]} and key {pair[1]}: {exc}"
            ) from exc
    return context


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _dechunk(body: bytes) -> bytes:
    out: list[bytes] = []
    index = 0
    while True:
        end = body.index(b"\r\n", index)
        size = int(body[index:end].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(body[end + 2 : end + 2 + size])
        index = end + 2 + size + 2


def parse_response(raw: bytes, method: str) -> Response:
    """An HTTP/1.1 response read until the server closed the connection."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if not sep or len(status_line) < 2 or not status_line[0].startswith("HTTP/"):
        raise ConnectError(f"Malformed response from the admin service: {lines[0][:80]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    try:
        status = int(status_line[1])
        if method == "HEAD" or status in (204, 304):
            body = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            body = _dechunk(body)
        elif "content-length" in headers:
            body = body[: int(headers["content-length"])]
    except ValueError as exc:
        raise ConnectError(f"Malformed response from the admin service: {exc}") from exc
    reason = status_line[2] if len(status_line) > 2 else ""
    return Response(status, reason, body, headers)


class StreamResponse:
    """A response read as it comes: the head, then the body's lines (chunked or not)."""

    def __init__(self, sock: socket.socket, read_timeout: float) -> None:
        self.sock = sock
        self.sock.settimeout(read_timeout)
        self.status_code = 0
        self.headers: dict[str, str] = {}
        self._buffer = b""
        self._chunked = False

    def close(self) -> None:
        self.sock.close()

    def _recv(self) -> bytes:
        try:
            data = self.sock.recv(65536)
        except TimeoutError as exc:
            raise ConnectError("No data from the admin service within the read timeout") from exc
        except OSError as exc:
            raise ConnectError(f"{type(exc).__name__}: {exc}") from exc
        return data

    def _until(self, marker: bytes) -> bytes | None:
        """The buffered bytes up to `marker` (consumed with it); None at end of stream."""
        while marker not in self._buffer:
            data = self._recv()
            if not data:
                return None
            self._buffer += data
        found, _, self._buffer = self._buffer.partition(marker)
        return found

    def _exactly(self, size: int) -> bytes | None:
        while len(self._buffer) < size:
            data = self._recv()
            if not data:
                return None
            self._buffer += data
        found, self._buffer = self._buffer[:size], self._buffer[size:]
        return found

    def read_head(self) -> None:
        head = self._until(b"\r\n\r\n")
        if head is None:
            raise ConnectError("The admin service closed the connection without an answer")
        lines = head.decode("latin-1").split("\r\n")
        status_line = lines[0].split(" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith("HTTP/"):
            raise ConnectError(f"Malformed response from the admin service: {lines[0][:80]!r}")
        try:
            self.status_code = int(status_line[1])
        except ValueError as exc:
            raise ConnectError(f"Malformed response from the admin service: {exc}") from exc
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        self._chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()

    def chunks(self) -> Iterator[bytes]:
        """The body as it arrives; ends when the server ends it (or closes)."""
        if not self._chunked:
            if self._buffer:
                yield self._buffer
                self._buffer = b""
            while data := self._recv():
                yield data
            return
        while True:
            size_line = self._until(b"\r\n")
            if size_line is None:
                return
            try:
                size = int(size_line.split(b";")[0], 16)
            except ValueError as exc:
                raise ConnectError("Malformed chunked body from the admin service") from exc
            if size == 0:
                return
            chunk = self._exactly(size + 2)
            if chunk is None:
                return
            yield chunk[:size]

    def lines(self) -> Iterator[str]:
        """The body's lines (without their end), as they arrive; a line cut off by the end
        of the stream is dropped."""
        pending = b""
        for chunk in self.chunks():
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for line in complete:
                yield line.removesuffix(b"\r").decode("utf-8", errors="replace")

    def read_rest(self) -> bytes:
        try:
            return b"".join(self.chunks())
        except ConnectError:
            return b""


def query(params: Params) -> str:
    """`?a=b&...`, booleans as `true`/`false` (as the Java client sends them)."""
    pairs = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in params.items()]
    return "?" + urlencode(pairs)


class AdminClient:
    def __init__(self, config: ClientConfig) -> None:
        if not config.admin_url:
            raise ConfigError(NO_ADMIN_URL)
        self.config = config
        self.base_url = config.admin_url.rstrip("/")
        self.headers = {
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
            **auth_headers(config.auth_plugin, config.auth_params),
        }

    def close(self) -> None:
        """Nothing to release: every request uses its own connection."""

    def _target(self) -> tuple[str, str, int, bool]:
        """(path prefix, host, port, tls) of the admin URL."""
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConnectError(f"Unsupported admin URL: {self.config.admin_url}")
        tls = parts.scheme == "https"
        try:
            port = parts.port or (443 if tls else 80)
        except ValueError as exc:
            raise ConnectError(f"Unsupported admin URL: {self.config.admin_url}") from exc
        return parts.path.rstrip("/"), parts.hostname, port, tls

    def _open(self, host: str, port: int, tls: bool) -> socket.socket:
        import socket

        context = tls_verification(self.config) if tls else None
        sock = socket.create_connection((host, port), timeout=float(self.config.request_timeout))
        if context is not None:
            try:
                return context.wrap_socket(sock, server_hostname=host)
            except BaseException:
                sock.close()
                raise
        return sock

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Params | None = None,
        json_body: Any = None,
        text_body: str | None = None,
        media_type: str = "application/json",
    ) -> Response:
        """Send; raise AdminError for an error status and ConnectError for no response.
        A JSON body goes as `media_type` (a structured `application/...+json` type when the
        resource asks for one)."""
        content = b""
        headers = dict(self.headers)
        if text_body is not None:
            content = text_body.encode()
            headers["Content-Type"] = "application/json"
        elif json_body is not None:
            content = json.dumps(json_body, separators=(",", ":"), ensure_ascii=False).encode()
            headers["Content-Type"] = media_type
        prefix, host, port, tls = self._target()
        default_port = 443 if tls else 80
        headers["Host"] = host if port == default_port else f"{host}:{port}"
        headers["Connection"] = "close"
        if content or method in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = str(len(content))
        target = prefix + url + (query(params) if params else "")
        head = f"{method} {target} HTTP/1.1\r\n" + "".join(
            f"{name}: {value}\r\n" for name, value in headers.items()
        )
        try:
            with self._open(host, port, tls) as sock:
                sock.sendall(head.encode("latin-1") + b"\r\n" + content)
                raw = _read_all(sock)
        except TimeoutError as exc:
            raise ConnectError(f"Request to {self.base_url}{url} timed out: {exc}") from exc
        except OSError as exc:
            raise ConnectError(f"{type(exc).__name__}: {exc}") from exc
        if not raw and tls:
            raise ConnectError(
                "The admin service closed the TLS connection without an answer (did it refuse "
                "the client certificate, or ask for one that was not given?)"
            )
        response = parse_response(raw, method)
        if response.status_code >= 400:
            raise AdminError(response.status_code, reason_of(response))
        return response

    def open_stream(
        self, url: str, *, params: Params | None = None, read_timeout: float
    ) -> StreamResponse:
        """A GET whose body is read as it arrives (`text/event-stream`): the head is parsed
        here (an error status raises `AdminError`, no answer `ConnectError`), the body is
        `StreamResponse.lines()`. A read that waits over `read_timeout` seconds raises
        `ConnectError`."""
        headers = dict(self.headers)
        headers["Accept"] = "text/event-stream"
        prefix, host, port, tls = self._target()
        default_port = 443 if tls else 80
        headers["Host"] = host if port == default_port else f"{host}:{port}"
        headers["Connection"] = "close"
        target = prefix + url + (query(params) if params else "")
        head = f"GET {target} HTTP/1.1\r\n" + "".join(
            f"{name}: {value}\r\n" for name, value in headers.items()
        )
        try:
            sock = self._open(host, port, tls)
        except OSError as exc:
            raise ConnectError(f"{type(exc).__name__}: {exc}") from exc
        stream = StreamResponse(sock, read_timeout)
        try:
            sock.sendall(head.encode("latin-1") + b"\r\n")
            stream.read_head()
        except BaseException:
            stream.close()
            raise
        if stream.status_code >= 400:
            body = stream.read_rest()
            stream.close()
            raise AdminError(
                stream.status_code,
                reason_of(Response(stream.status_code, "", body, stream.headers)),
            )
        return stream

    def get_json(self, url: str, params: Params | None = None) -> Any:
        response = self.request("GET", url, params=params)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def get_text(self, url: str) -> str | None:
        response = self.request("GET", url)
        if response.status_code == 204 or not response.content:
            return None
        return response.text

    def put(self, url: str, body: Any = None, params: Params | None = None,
            media_type: str = "application/json") -> None:
        self.request("PUT", url, json_body=body, params=params, media_type=media_type)

    def post(self, url: str, body: Any = None, params: Params | None = None) -> None:
        self.request("POST", url, json_body=body, params=params)

    def post_text(self, url: str, text: str) -> None:
        self.request("POST", url, text_body=text)

    def delete(self, url: str, params: Params | None = None) -> None:
        self.request("DELETE", url, params=params)


__all__ = [
    "NO_ADMIN_URL",
    "V2",
    "AdminClient",
    "Response",
    "StreamResponse",
    "parse_response",
    "path",
    "query",
    "reason_of",
    "segment",
    "tls_verification",
]
