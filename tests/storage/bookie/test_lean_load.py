"""The bookie bench's lean load generator (bench/lean_load.py, its loop compiled in
bench/leanloop.pyx) against a real bookie: every add acknowledged and durable, one latency per
add, and a failed add or a stray response stops the loop with a clear error."""

from __future__ import annotations

import math
import socket
import threading

import pytest

from bench.lean_load import build_frames, lean_run
from storage.bookie.protocol import ResultCode
from storage.bookie_client import BookieClient
from tests.storage.bookie.conftest import BookieFactory
from tests.storage.bookie.support import MASTER_KEY

PAYLOAD = b"\x5a" * 1024
BASE = 700_000


async def test_every_add_is_acknowledged_with_its_latency(start_bookie: BookieFactory) -> None:
    bookie = start_bookie()
    slots, per_slot = 8, 40
    frames = build_frames(slots, per_slot, BASE, PAYLOAD, MASTER_KEY)
    # A bound far beyond the run: every slot ends by running out of frames.
    adds, elapsed, latencies = lean_run(bookie.bookie_id, frames, 60.0, BASE)
    assert adds == slots * per_slot
    assert len(latencies) == adds
    assert all(math.isfinite(ms) and 0 < ms < elapsed * 1e3 for ms in latencies)
    async with await BookieClient.connect(bookie.bookie_id) as client:
        for slot in range(slots):
            last = await client.read(BASE + slot, -1)
            packaged = await client.read(BASE + slot, per_slot - 1)
            assert last == packaged
            assert packaged.endswith(PAYLOAD)


def test_a_run_goes_on_where_the_last_one_stopped(start_bookie: BookieFactory) -> None:
    bookie = start_bookie()
    frames = build_frames(4, 30, BASE + 400, PAYLOAD, MASTER_KEY)
    assert lean_run(bookie.bookie_id, [mine[:10] for mine in frames], 60.0, BASE + 400)[0] == 40
    # Each slot's first response now names entry 10: the one it has in flight.
    adds, _, latencies = lean_run(bookie.bookie_id, [mine[10:] for mine in frames], 60.0,
                                  BASE + 400)
    assert adds == len(latencies) == 80


def test_the_run_stops_at_its_bound(start_bookie: BookieFactory) -> None:
    bookie = start_bookie()
    slots, per_slot = 4, 100_000
    frames = build_frames(slots, per_slot, BASE + 100, b"x" * 16, MASTER_KEY)
    adds, elapsed, latencies = lean_run(bookie.bookie_id, frames, 0.3, BASE + 100)
    assert 0 < adds < slots * per_slot
    assert len(latencies) == adds
    assert elapsed >= 0.3


def test_a_failed_add_stops_the_run(start_bookie: BookieFactory) -> None:
    bookie = start_bookie()
    frames = build_frames(2, 3, BASE + 200, PAYLOAD, MASTER_KEY)
    lean_run(bookie.bookie_id, frames, 60.0, BASE + 200)
    # The same ledgers under another master key: the bookie answers EUA.
    other = build_frames(2, 3, BASE + 200, PAYLOAD, b"\xee" * 20)
    with pytest.raises(RuntimeError, match=f"add failed with code {int(ResultCode.EUA)}"):
        lean_run(bookie.bookie_id, other, 60.0, BASE + 200)


def test_a_response_for_another_ledger_stops_the_run(start_bookie: BookieFactory) -> None:
    bookie = start_bookie()
    frames = build_frames(2, 3, BASE + 300, PAYLOAD, MASTER_KEY)
    # The loop told its ledgers start one further on: the first response names a ledger it
    # has no slot for.
    with pytest.raises(RuntimeError, match=f"response for ledger {BASE + 300}, not one of"):
        lean_run(bookie.bookie_id, frames, 60.0, BASE + 301)


def test_a_closed_connection_stops_the_run() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        frames = build_frames(1, 1, BASE, PAYLOAD, MASTER_KEY)
        # The listener never answers; closing the accepted side ends the run.
        def close_first() -> None:
            conn, _ = server.accept()
            conn.recv(1 << 16)
            conn.close()

        closer = threading.Thread(target=close_first)
        closer.start()
        with pytest.raises((ConnectionError, OSError)):
            lean_run(f"127.0.0.1:{port}", frames, 60.0, BASE)
        closer.join(timeout=10)
