"""A lean load generator for one bookie: a pipelined closed loop on a plain blocking socket.

Every V2 add frame (length, header, master key, packaged entry with its CRC32C digest) is
built before the clock starts; a response is taken by its fixed 28-byte frame (length, header,
result, ledger id, entry id), must be EOK, and frees its slot for that ledger's next add. An
ack means what it means for any client: the bookie answers an add only after the fdatasync
of its journal group. The generator spends a few µs of CPU per add (against ~13-20 µs for the
asyncio `BookieClient` loop), so on a 2-core machine the bookie, not the client, is measured.
"""

from __future__ import annotations

import socket
import struct
import time

from storage.bookie.format import package_entry
from storage.bookie.protocol import encode_add

_ADD_RESPONSE = struct.Struct(">IIiqq")  # frame length, header, result, ledger id, entry id
_RESPONSE_LEN = _ADD_RESPONSE.size
_ADD_RESPONSE_HEAD = 2 << 24 | 1 << 16  # protocol version 2, ADD_ENTRY, no flags


def build_frames(slots: int, per_slot: int, base: int, payload: bytes, master_key: bytes
                 ) -> list[list[bytes]]:
    """Every add frame of a run, per slot (slot i adds to ledger base + i, entries 0 up),
    built before the clock starts."""
    frames = []
    for slot in range(slots):
        ledger_id = base + slot
        mine = []
        length = 0
        for entry_id in range(per_slot):
            length += len(payload)
            entry = package_entry(ledger_id, entry_id, entry_id - 1, length, payload)
            mine.append(encode_add(ledger_id, entry_id, master_key, entry))
        frames.append(mine)
    return frames


def lean_run(address: str, frames: list[list[bytes]], seconds: float, base: int
             ) -> tuple[int, float, list[float]]:
    """The lean closed loop: (adds acknowledged, elapsed s, latencies ms). Stops at `seconds`
    or when a slot runs out of pre-built frames."""
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    slots = len(frames)
    sent_at = [0.0] * slots
    next_index = [1] * slots
    latencies: list[float] = []
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    have = 0
    unpack = _ADD_RESPONSE.unpack_from
    clock = time.perf_counter
    started = clock()
    stop = started + seconds
    for slot in range(slots):
        sent_at[slot] = started
    sock.sendall(b"".join(mine[0] for mine in frames))
    in_flight = slots
    adds = 0
    sending = True
    while in_flight:
        got = sock.recv_into(view[have:])
        if not got:
            raise ConnectionError("bookie closed the connection")
        have += got
        now = clock()
        if now >= stop:
            sending = False
        out = []
        offset = 0
        while have - offset >= _RESPONSE_LEN:
            length, head, code, ledger_id, _ = unpack(buf, offset)
            offset += _RESPONSE_LEN
            if length != _RESPONSE_LEN - 4 or head != _ADD_RESPONSE_HEAD:
                raise RuntimeError(f"not an add response: length {length}, header {head:#x}")
            if code != 0:
                raise RuntimeError(f"add failed with code {code}")
            slot = ledger_id - base
            latencies.append((now - sent_at[slot]) * 1e3)
            adds += 1
            index = next_index[slot]
            if sending and index < len(frames[slot]):
                out.append(frames[slot][index])
                next_index[slot] = index + 1
                sent_at[slot] = now
            else:
                in_flight -= 1
        if offset:
            buf[: have - offset] = buf[offset:have]
            have -= offset
        if out:
            sock.sendall(b"".join(out))
    elapsed = clock() - started
    sock.close()
    return adds, elapsed, latencies
