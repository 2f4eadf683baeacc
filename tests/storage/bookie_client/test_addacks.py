"""The client's compiled add path (`storage.bookie_client.addacks`) at its boundary: the add
frame against the protocol's Python encoder on random inputs, the acknowledgement ring
against a plain model of upstream's ordered acknowledgement, and the one-pass routing of a
read's responses, malformed ones included."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.bookie.errors import MalformedFrame
from storage.bookie.format import package_entry, verify_entry
from storage.bookie.protocol import (
    ADD_IDS_AT,
    OpCode,
    ResultCode,
    decode_request,
    decode_response_head,
    encode_add,
    encode_add_response,
    encode_response,
)
from storage.bookie_client import AckListener, AckRing, encode_add_frame
from storage.bookie_client.addacks import route_responses

# A ZooKeeper client of a session fixture, alive in its own thread while this module runs,
# draws a jitter from the global `random` on every turn of its connection loop (kazoo's
# `connection.py`); Hypothesis takes any change of that state during a draw for use by a
# strategy. None of this module's strategies use `random`.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies"
)

KEY = bytes(range(20))
i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@settings(max_examples=300, deadline=None)
@given(ledger_id=st.integers(min_value=0, max_value=2**63 - 1),
       entry_id=st.integers(min_value=0, max_value=2**63 - 1), lac=i64, length=i64,
       key=st.binary(min_size=20, max_size=20), payload=st.binary(max_size=3000),
       flags=st.sampled_from([0, 2, 4, 6, 0xFFFF]))
def test_add_frame_is_the_python_encoders_bytes(ledger_id: int, entry_id: int, lac: int,
                                                length: int, key: bytes, payload: bytes,
                                                flags: int) -> None:
    frame = encode_add_frame(ledger_id, entry_id, lac, length, key, payload, flags)
    packaged = package_entry(ledger_id, entry_id, lac, length, payload)
    assert frame == encode_add(ledger_id, entry_id, key, packaged, flags)
    request = decode_request(frame[4:])  # and the bookie's decoder reads it back
    assert (request.ledger_id, request.entry_id) == (ledger_id, entry_id)
    assert verify_entry(frame[4 + ADD_IDS_AT:], ledger_id, entry_id).length == length


def test_add_frame_takes_any_buffer_and_refuses_bad_keys() -> None:
    payload = b"abc" * 100
    expected = encode_add_frame(1, 2, 1, 300, KEY, payload)
    assert encode_add_frame(1, 2, 1, 300, KEY, memoryview(payload)) == expected
    assert encode_add_frame(1, 2, 1, 300, KEY, bytearray(payload)) == expected
    for key in (b"", KEY[:19], KEY + b"x"):
        with pytest.raises(ValueError, match="master key must be 20 bytes"):
            encode_add_frame(1, 2, 1, 300, key, payload)
    with pytest.raises(TypeError):
        encode_add_frame(1, 2, 1, 300, KEY, None)  # type: ignore[arg-type]


def test_ring_refuses_impossible_quorums() -> None:
    for e, qw, qa in ((3, 3, 4), (3, 4, 2), (3, 3, 0), (0, 0, 0)):
        with pytest.raises(ValueError):
            AckRing(e, qw, qa)
    with pytest.raises(ValueError, match="above 64"):
        AckRing(65, 65, 2)
    with pytest.raises(ValueError, match="negative"):
        AckRing(3, 3, 2, -1)


def test_ring_completes_in_order_only_on_qa_copies_of_the_write_set() -> None:
    ring = AckRing(5, 3, 2)  # entry e goes to ensemble indexes e, e+1, e+2 (mod 5)
    assert [ring.push(0.0) for _ in range(4)] == [0, 1, 2, 3]
    assert not ring.ack(1, 0)  # index 0 is not in entry 1's write set
    assert ring.ack(1, 1) is False and ring.ack(1, 1) is False  # a duplicate does not count
    assert ring.ack(1, 3)  # second copy: quorum
    assert ring.take_completed() == 0  # entry 0 is not there yet
    assert ring.ack(0, 4) is False and ring.fail(0, 0) == 1
    assert ring.ack(0, 2) is False  # one ack of two
    assert ring.take_completed() == 0
    assert ring.ack(0, 1)
    assert ring.failed_indexes(0) == [0] and ring.fail(0, 0) == -1  # answered already
    assert ring.take_completed() == 2 and ring.completed == 2
    # entry 0 had all its copies answered and left; entry 1 waits for index 2
    assert ring.tail == 1 and ring.outstanding == 3
    assert ring.ack(7, 0) is False and ring.fail(0, 1) == -1  # outside the ring


def test_ring_keeps_an_entry_until_every_copy_answered_and_grows() -> None:
    ring = AckRing(3, 3, 2, capacity=16)
    for _ in range(1000):  # far past the first capacity, none answered
        ring.push(1.0)
    for e in range(1000):
        ring.ack(e, 0)
        ring.ack(e, 1)
    assert ring.take_completed() == 1000 and ring.tail == 0
    assert ring.expire(2, 0.5) == []  # sent at 1.0: not before 0.5
    assert ring.expire(2, 2.0) == list(range(1000))
    assert ring.take_completed() == 0 and ring.outstanding == 0 and ring.tail == 1000


def test_ring_reset_index_resends_pending_and_fails_handed_over_copies() -> None:
    ring = AckRing(3, 3, 2)
    for _ in range(3):
        ring.push(1.0)
    for e in range(2):
        ring.ack(e, 0)
        ring.ack(e, 2)
    ring.ack(2, 1)
    assert ring.take_completed() == 2
    # index 1 is replaced: entry 2 (pending) forgets its ack and goes to the new bookie;
    # entries 0 and 1 (handed over) will never hear from index 1 again
    assert ring.reset_index(1, 5.0) == [2]
    assert not ring.has_quorum(2) and ring.outstanding == 1
    assert ring.expire(1, 4.0) == []  # re-sent at 5.0
    assert ring.ack(2, 1) is False and ring.ack(2, 0)
    assert ring.take_completed() == 1
    assert ring.fail_index(2) == [2] and ring.take_completed() == 0
    assert ring.outstanding == 0


def test_take_all_hands_over_everything() -> None:
    ring = AckRing(2, 2, 2)
    for _ in range(5):
        ring.push(0.0)
    assert ring.take_all() == 5 and ring.outstanding == 0 and ring.ack(3, 0) is False


class Model:
    """Upstream's ordered acknowledgement, one set per entry (PendingAddOp), in plain Python."""

    def __init__(self, e: int, qw: int, qa: int) -> None:
        self.e, self.qw, self.qa = e, qw, qa
        self.acked: list[set[int]] = []
        self.failed: list[set[int]] = []
        self.completed = 0

    def write_set(self, entry: int) -> set[int]:
        return {(entry + i) % self.e for i in range(self.qw)}

    def answer(self, entry: int, index: int, ok: bool) -> None:
        if not 0 <= entry < len(self.acked) or index not in self.write_set(entry):
            return
        if index in self.acked[entry] | self.failed[entry]:
            return
        (self.acked if ok else self.failed)[entry].add(index)

    def take(self) -> int:
        start = self.completed
        while self.completed < len(self.acked) and len(self.acked[self.completed]) >= self.qa:
            self.completed += 1
        return self.completed - start


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_ring_agrees_with_the_model_on_random_answers(data: st.DataObject) -> None:
    e = data.draw(st.integers(1, 8))
    qw = data.draw(st.integers(1, e))
    qa = data.draw(st.integers(1, qw))
    ring, model = AckRing(e, qw, qa, capacity=16), Model(e, qw, qa)
    for _ in range(data.draw(st.integers(1, 60))):
        action = data.draw(st.sampled_from(["push", "ack", "fail", "take"]))
        if action == "push":
            model.acked.append(set())
            model.failed.append(set())
            assert ring.push(0.0) == len(model.acked) - 1
        elif action == "take":
            assert ring.take_completed() == model.take()
            assert ring.completed == model.completed
        else:
            entry = data.draw(st.integers(-1, len(model.acked)))
            index = data.draw(st.integers(-1, e))
            (ring.ack if action == "ack" else ring.fail)(entry, index)
            model.answer(entry, index, action == "ack")
        for entry in range(ring.completed, len(model.acked)):
            assert ring.has_quorum(entry) == (len(model.acked[entry]) >= qa)
            assert ring.failed_indexes(entry) == sorted(model.failed[entry])
        # an entry leaves the ring only once handed over with every copy answered
        assert all(entry < model.completed and len(model.acked[entry] | model.failed[entry])
                   == qw for entry in range(ring.tail))


def _routing(*frames: bytes, awaited: dict[tuple[int, int, int], object] | None = None
             ) -> tuple[AckRing, list[object], list[tuple[int, int]], list[bytes]]:
    ring = AckRing(3, 3, 2)
    for _ in range(3):
        ring.push(0.0)
    delivered: list[object] = []
    listener = AckListener(ring, 0, delivered.append)
    buf = b"".join(frames)
    reached, others = route_responses(buf, 0, len(buf), {7: listener}, awaited or {})
    for each in reached:
        each.deliver()
    return ring, delivered, others, [buf[s:t] for s, t in others]


def test_route_responses_counts_a_reads_add_answers_and_returns_the_rest_in_order() -> None:
    read = encode_response(OpCode.READ_ENTRY, ResultCode.EOK, 7, 0, b"entry")
    other_ledger = encode_add_response(ResultCode.EOK, 8, 0)
    ring, delivered, _, rest = _routing(
        encode_add_response(ResultCode.EOK, 7, 0), read, encode_add_response(ResultCode.EOK,
                                                                             7, 1),
        other_ledger, encode_add_response(ResultCode.EFENCED, 7, 2),
        encode_add_response(ResultCode.EOK, 7, 99))  # never sent: ignored by the ring
    assert rest == [read[4:], other_ledger[4:]]
    assert delivered == [[(2, ResultCode.EFENCED)]]  # one delivery for the whole read
    assert ring.ack(0, 0) is False and ring.ack(1, 0) is False  # counted already
    # the error answer was counted neither way (its owner decides): index 0 may still answer
    assert ring.ack(2, 0) is False and ring.ack(2, 1) is True


def test_route_responses_leaves_awaited_requests_and_malformed_frames_to_the_caller() -> None:
    awaited_add = encode_add_response(ResultCode.EOK, 7, 1)
    short = struct.pack(">I", 8) + b"\x02\x01\x00\x00\x00\x00\x00\x00"  # an add, cut short
    v3 = struct.pack(">I", 6) + b"\x0a\x04\x08\x03\x10\x09"
    _, delivered, _, rest = _routing(awaited_add, short, v3,
                                     awaited={(OpCode.ADD_ENTRY, 7, 1): object()})
    assert rest == [awaited_add[4:], short[4:], v3[4:]] and delivered == []


def test_route_responses_refuses_a_frame_past_the_span() -> None:
    ring = AckRing(3, 3, 2)
    listener = AckListener(ring, 0, lambda answers: None)
    frame = encode_add_response(ResultCode.EOK, 7, 0)
    with pytest.raises(ValueError, match="runs past"):
        route_responses(frame, 0, len(frame) - 1, {7: listener}, {})
    with pytest.raises(ValueError, match="outside"):
        route_responses(frame, 0, len(frame) + 1, {7: listener}, {})


frame_bodies = st.one_of(
    st.builds(lambda code, ledger, entry: encode_add_response(code, ledger, entry)[4:],
              st.sampled_from([0, 1, 2, 103, -101]), st.integers(6, 9), st.integers(-1, 40)),
    st.builds(lambda ledger, entry, body: encode_response(OpCode.READ_ENTRY, 0, ledger, entry,
                                                          body)[4:],
              st.integers(6, 9), st.integers(0, 40), st.binary(max_size=40)),
    st.binary(max_size=40),  # anything at all, V3-looking or short
)


@settings(max_examples=300, deadline=None)
@given(bodies=st.lists(frame_bodies, max_size=20),
       awaited_entries=st.sets(st.integers(0, 40), max_size=5))
def test_route_responses_agrees_with_the_python_decoder(bodies: list[bytes],
                                                        awaited_entries: set[int]) -> None:
    """Each frame goes to the listener exactly when the protocol's Python decoder reads it as
    an add response of a listened ledger whose key no call awaits; every other frame comes
    back, in order; the listener sees exactly the routed error answers."""
    buf = b"".join(struct.pack(">I", len(body)) + body for body in bodies)
    ring = AckRing(3, 3, 2)
    for _ in range(41):
        ring.push(0.0)
    delivered: list[object] = []
    listener = AckListener(ring, 0, delivered.append)
    awaited: dict[tuple[int, int, int], object] = {
        (OpCode.ADD_ENTRY, 7, e): None for e in awaited_entries}
    reached, others = route_responses(buf, 0, len(buf), {7: listener}, awaited)
    for each in reached:
        each.deliver()

    expected_others, expected_errors, expected_acks, pos = [], [], set(), 0
    for body in bodies:
        start, pos = pos + 4, pos + 4 + len(body)
        try:
            opcode, code, ledger, entry = decode_response_head(buf, start, pos)
        except MalformedFrame:
            expected_others.append((start, pos))
            continue
        if opcode != OpCode.ADD_ENTRY or ledger != 7 or (opcode, ledger, entry) in awaited:
            expected_others.append((start, pos))
        elif code != ResultCode.EOK:
            expected_errors.append((entry, code))
        else:
            expected_acks.add(entry)
    assert others == expected_others
    assert delivered == ([expected_errors] if len(reached) else [])
    # the routed acknowledgements are counted for index 0, and nothing else is
    assert {e for e in range(41) if ring.fail(e, 0) == -1} == expected_acks - {-1}
