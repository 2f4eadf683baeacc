"""A lean load generator for one bookie: a pipelined closed loop on a plain blocking socket.

Every V2 add frame (length, header, master key, packaged entry with its CRC32C digest) is
built before the clock starts; the loop itself is compiled (bench/leanloop.pyx) and runs
without the GIL: a response is taken by its fixed 28-byte frame (length, header, result,
ledger id, entry id), must be EOK for the entry its slot has in flight, and frees that slot
for its ledger's next add. An ack means what it means for any client: the bookie answers an
add only after the fdatasync of its journal group. The generator spends well under 1 µs of
CPU per add (against ~13-20 µs for the asyncio `BookieClient` loop), so on a 2-core machine
the bookie, not the client, is measured.
"""

from __future__ import annotations

import socket

from bench import leanloop
from storage.bookie_client.addacks import encode_add_frame


def build_frames(slots: int, per_slot: int, base: int, payload: bytes, master_key: bytes
                 ) -> list[list[bytes]]:
    """Every add frame of a run, per slot (slot i adds to ledger base + i, entries 0 up),
    built before the clock starts, by the client's compiled frame encoder."""
    frames = []
    for slot in range(slots):
        ledger_id = base + slot
        frames.append([
            encode_add_frame(ledger_id, entry_id, entry_id - 1, (entry_id + 1) * len(payload),
                             master_key, payload)
            for entry_id in range(per_slot)
        ])
    return frames


def lean_run(address: str, frames: list[list[bytes]], seconds: float, base: int
             ) -> tuple[int, float, list[float]]:
    """The lean closed loop: (adds acknowledged, elapsed s, latencies ms). Stops at `seconds`
    or when a slot runs out of pre-built frames."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return leanloop.run(sock.fileno(), frames, seconds, base)
