"""Stalled clients on the admin port and on a bookie port are cut off within their timeouts
while normal clients go on; the admin port holds at most maxHttpServerConnections. Short
timeouts are configured so the test runs in seconds; the bounds asserted are the timeouts plus
a margin for a shared machine, not speeds."""

from __future__ import annotations

import selectors
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.storage.bookie.support import BookieProcess, service_on_bookies
from tests.support import ServerProcess, wait_until

IDLE = 1.0
HEADER = 2.0
FRAME = 2.0
MARGIN = 15.0  # seconds on top of a timeout before a connection counts as not cut


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[ServerProcess, BookieProcess, Path]]:
    work: Path = tmp_path_factory.mktemp("conns")
    with service_on_bookies(
        work, 2,
        bookie_conf={"serverIdleTimeoutSeconds": str(IDLE * 2),
                     "serverFrameTimeoutSeconds": str(FRAME)},
        service_conf={
            "maxHttpServerConnections": "5000",
            "httpServerIdleTimeoutSeconds": str(IDLE),
            "httpServerHeaderTimeoutSeconds": str(HEADER),
            "httpServerBodyTimeoutSeconds": str(HEADER),
        },
        namespaces=["conn/ns"],
    ) as (server, _, bookies):
        yield server, bookies[0], work


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setblocking(False)
    return sock


def closed_times(socks: list[socket.socket], started: float, deadline: float,
                 dribble: bytes = b"") -> dict[int, float]:
    """Wait for the peer to close each socket (EOF or reset), sending `dribble` a byte at a
    time on each meanwhile; seconds from `started` to each close, by file descriptor."""
    selector = selectors.DefaultSelector()
    for sock in socks:
        selector.register(sock, selectors.EVENT_READ)
    closed: dict[int, float] = {}
    position = 0
    last_drip = 0.0
    while len(closed) < len(socks) and time.monotonic() < deadline:
        now = time.monotonic()
        if dribble and position < len(dribble) and now - last_drip >= 0.2:
            for sock in socks:
                if sock.fileno() not in closed:
                    try:
                        sock.send(dribble[position:position + 1])
                    except OSError:
                        closed.setdefault(sock.fileno(), now - started)
            position, last_drip = position + 1, now
        for key, _ in selector.select(timeout=0.05):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                closed[sock.fileno()] = time.monotonic() - started
                selector.unregister(sock)
    selector.close()
    return closed


def test_stalled_connections_are_cut_while_normal_clients_go_on(
        bounded: tuple[ServerProcess, BookieProcess, Path]) -> None:
    server, bookie, _ = bounded
    answers: list[int] = []
    stop = threading.Event()

    def normal() -> None:  # a client that reads and produces throughout
        with httpx.Client(base_url=server.url, timeout=30) as http:
            while not stop.is_set():
                answers.append(http.get("/admin/v2/namespaces/conn").status_code)
                answers.append(http.post("/topics/persistent/conn/ns/t", json={
                    "messages": [{"payload": "x"}]}).status_code)

    worker = threading.Thread(target=normal)
    worker.start()
    port = int(server.url.rsplit(":", 1)[1])
    opened: list[socket.socket] = []
    try:
        started = time.monotonic()
        idle = [connect(port) for _ in range(2000)]
        opened += idle
        idle_closed = closed_times(idle, started, started + IDLE + MARGIN)
        assert len(idle_closed) == len(idle)
        assert max(idle_closed.values()) <= IDLE + MARGIN

        started = time.monotonic()
        dribbling = [connect(port) for _ in range(200)]
        opened += dribbling
        request = b"GET /admin/v2/namespaces/conn HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + (
            b"a" * 200)
        dribbled = closed_times(dribbling, started, started + HEADER + MARGIN, request)
        assert len(dribbled) == len(dribbling)
        assert max(dribbled.values()) <= HEADER + MARGIN

        # the bookie port: half a frame, then a byte at a time; and connections that idle
        bookie_port = bookie.port
        started = time.monotonic()
        halves = [connect(bookie_port) for _ in range(200)]
        opened += halves
        for sock in halves:
            sock.send(struct.pack(">I", 1000) + b"\x02\x00\x00\x00")
        cut = closed_times(halves, started, started + FRAME + MARGIN, b"z" * 200)
        assert len(cut) == len(halves)
        assert max(cut.values()) <= FRAME + MARGIN
        started = time.monotonic()
        quiet = [connect(bookie_port) for _ in range(50)]
        opened += quiet
        quiet_cut = closed_times(quiet, started, started + 2 * IDLE + MARGIN)
        assert len(quiet_cut) == len(quiet)
    finally:
        stop.set()
        worker.join(timeout=60)
        for sock in opened:
            sock.close()
    assert answers and set(answers) == {200}, sorted(set(answers))
    log = (server.workdir / "server.log").read_text()
    # each kind of cut is logged once, its repeats counted, not a line per connection
    assert log.count("(httpServerIdleTimeoutSeconds)") < 20
    assert "(httpServerHeaderTimeoutSeconds)" in log
    assert "Traceback" not in log
    bookie_log = bookie.log_path.read_text()
    assert "(serverFrameTimeoutSeconds)" in bookie_log


def test_the_admin_port_holds_at_most_max_http_server_connections(
        bounded: tuple[ServerProcess, BookieProcess, Path], tmp_path: Path) -> None:
    source, _, _ = bounded
    server = ServerProcess(source.metadata_store_url, tmp_path / "small", extra_conf={
        "initializeClusterMetadata": "false", "maxHttpServerConnections": "20",
        "httpServerIdleTimeoutSeconds": "60"}).start()
    port = int(server.url.rsplit(":", 1)[1])
    held = []
    try:
        held = [connect(port) for _ in range(20)]
        extra: list[socket.socket] = []
        reset_at_once = 0  # the server's reset arrived before `connect` returned (a busy client)
        for _ in range(10):
            try:
                extra.append(connect(port))
            except ConnectionResetError:
                reset_at_once += 1
        started = time.monotonic()
        refused = closed_times(extra, started, started + MARGIN)
        assert len(refused) + reset_at_once == 10  # closed at once, not served
        for sock in extra:
            sock.close()
        for sock in held:
            sock.close()
        held = []
        # once those are gone, clients are served again
        wait_until(lambda: httpx.get(f"{server.url}/admin/v2/clusters").status_code == 200,
                   timeout=MARGIN)
        assert "(maxHttpServerConnections)" in (server.workdir / "server.log").read_text()
    finally:
        for sock in held:
            sock.close()
        server.stop()


def test_a_busy_keep_alive_connection_outlives_the_timeouts_and_is_cut_when_it_stalls(
        bounded: tuple[ServerProcess, BookieProcess, Path]) -> None:
    """Requests on one connection for longer than the idle and header timeouts together,
    each one's headers sent in two parts with a pause well inside the header timeout: each
    request moves the connection's bound, so none is cut; a request that then stalls in its
    headers is still cut."""
    server, _, _ = bounded
    port = int(server.url.rsplit(":", 1)[1])
    first, rest = b"GET /admin/v2/namespaces/conn HTTP/1.1\r\n", b"Host: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        answered = 0
        until = time.monotonic() + IDLE + HEADER + 1
        while time.monotonic() < until:
            sock.sendall(first)
            sock.settimeout(HEADER / 5)
            with pytest.raises(TimeoutError):  # no answer and no close to half a request
                sock.recv(1)
            sock.settimeout(10)
            sock.sendall(rest)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(65536)
                assert chunk, f"closed after {answered} answers"
                head += chunk
            assert head.startswith(b"HTTP/1.1 200 "), head[:100]
            length = int(head.split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
            body = head.split(b"\r\n\r\n", 1)[1]
            while len(body) < length:
                body += sock.recv(65536)
            answered += 1
        sock.sendall(first)  # and no more
        sock.setblocking(False)
        started = time.monotonic()
        closed = closed_times([sock], started, started + HEADER + MARGIN)
    assert answered > 1 and len(closed) == 1
    assert max(closed.values()) <= HEADER + MARGIN
