# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled part of a writer's adds on the client side: the add frame, the acknowledgement
counters and the one pass over a read of responses.

- `encode_add_frame`: the V2 add request of one entry (length prefix, header, master key, then
  the packaged entry with its CRC32C digest), built in one allocation once for all the bookies
  of the entry's write set. It is byte for byte `protocol.encode_add(format.package_entry(...))`.
- `AckRing`: the state of a writer's entries from the oldest with a copy still unanswered to
  the newest sent, in a ring of fixed-size slots indexed by entry id: per entry the write-set
  positions that acknowledged (a bit mask), those that failed, whether Qa acknowledged, and
  when it was sent. No Python object per entry or per copy.
- `AckListener`: one bookie connection's view of a ring (the ensemble index that bookie holds).
- `route_responses`: every add response of a read handed to the listener of its ledger, in C;
  the other frames are returned to the connection's Python path.

CRC32C is `storage/bookie/addpath_crc.h`, the bookie's own implementation.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_Append
from cpython.object cimport PyObject
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy

cdef extern from "addpath_crc.h":
    void addpath_crc_init()
    uint32_t addpath_crc(uint32_t crc, const unsigned char *p, size_t n) nogil
    int64_t addpath_be64(const unsigned char *p) nogil
    uint32_t addpath_be32(const unsigned char *p) nogil
    void addpath_put_be32(unsigned char *p, uint32_t v) nogil

addpath_crc_init()

Answers = list[tuple[int, int]] | BaseException
# what a listener's callback receives: the (entry id, result code) of the error answers of
# one read (maybe none), or the error that broke the connection

# The V2 layout (storage.bookie.protocol, storage.bookie.format)
DEF MASTER_KEY_LEN = 20
DEF ENTRY_HEADER_LEN = 32    # ledger, entry, LAC, length (i64 each)
DEF ADD_FRAME_OVERHEAD = 4 + 4 + MASTER_KEY_LEN + ENTRY_HEADER_LEN + 4
DEF ADD_REQUEST_HEAD = 0x02010000  # version 2, ADD_ENTRY
DEF RESPONSE_BODY = 24       # header, result, ledger id, entry id
DEF OP_ADD_ENTRY = 1
DEF MAX_WRITE_QUORUM = 64    # write-set positions are bits of a u64


cdef inline void _put_be64(unsigned char *p, int64_t value) noexcept nogil:
    cdef uint64_t v = <uint64_t>value
    addpath_put_be32(p, <uint32_t>(v >> 32))
    addpath_put_be32(p + 4, <uint32_t>v)


def encode_add_frame(int64_t ledger_id, int64_t entry_id, int64_t last_add_confirmed,
                     int64_t length, bytes master_key, payload, uint32_t flags=0):
    """The add request frame of a packaged entry with the CRC32C digest: what
    `encode_add(ledger_id, entry_id, master_key, package_entry(...), flags)` returns."""
    if master_key is None or PyBytes_GET_SIZE(master_key) != MASTER_KEY_LEN:
        raise ValueError(f"master key must be {MASTER_KEY_LEN} bytes")
    if payload is None:
        raise TypeError("a bytes-like payload is required, not 'NoneType'")
    cdef const unsigned char[::1] view = payload
    cdef Py_ssize_t n = view.shape[0]
    cdef bytes frame = PyBytes_FromStringAndSize(NULL, ADD_FRAME_OVERHEAD + n)
    cdef unsigned char *out = <unsigned char *>PyBytes_AS_STRING(frame)
    cdef unsigned char *entry = out + 8 + MASTER_KEY_LEN
    addpath_put_be32(out, <uint32_t>(ADD_FRAME_OVERHEAD - 4 + n))
    addpath_put_be32(out + 4, ADD_REQUEST_HEAD | (flags & 0xFFFF))
    memcpy(out + 8, PyBytes_AS_STRING(master_key), MASTER_KEY_LEN)
    _put_be64(entry, ledger_id)
    _put_be64(entry + 8, entry_id)
    _put_be64(entry + 16, last_add_confirmed)
    _put_be64(entry + 24, length)
    cdef uint32_t digest = addpath_crc(0, entry, ENTRY_HEADER_LEN)
    if n:
        memcpy(entry + ENTRY_HEADER_LEN + 4, &view[0], n)
        digest = addpath_crc(digest, &view[0], n)
    addpath_put_be32(entry + ENTRY_HEADER_LEN, digest)
    return frame


cdef inline int _popcount(uint64_t v) noexcept nogil:
    return __builtin_popcountll(v)

cdef extern from *:
    int __builtin_popcountll(unsigned long long) nogil


cdef class AckRing:
    """Entries `tail` .. `head - 1` of one writer: `completed` is the next entry to hand to
    the caller (every entry below it had Qa acknowledgements and was handed over in order);
    an entry stays until every copy of its write set answered or failed, so a late failure
    of a copy past its quorum is still seen. Copies are told apart by their ensemble index;
    their bit is the index's position in the entry's write set, (index - entry) mod E."""

    cdef readonly int ensemble_size, write_quorum, ack_quorum
    cdef readonly int64_t tail, completed, head
    cdef Py_ssize_t capacity
    cdef uint64_t *acked
    cdef uint64_t *failed
    cdef double *sent
    cdef unsigned char *quorum

    def __cinit__(self, int ensemble_size, int write_quorum, int ack_quorum,
                  int64_t first_entry=0, Py_ssize_t capacity=256):
        if not 1 <= ack_quorum <= write_quorum <= ensemble_size:
            raise ValueError(f"need 1 <= Qa ({ack_quorum}) <= Qw ({write_quorum}) <= E "
                             f"({ensemble_size})")
        if write_quorum > MAX_WRITE_QUORUM:
            raise ValueError(f"write quorum {write_quorum} above {MAX_WRITE_QUORUM}")
        if first_entry < 0:
            raise ValueError(f"first entry {first_entry} is negative")
        self.ensemble_size = ensemble_size
        self.write_quorum = write_quorum
        self.ack_quorum = ack_quorum
        self.tail = self.completed = self.head = first_entry
        self.capacity = 0
        self._allocate(max(capacity, 16))

    def __dealloc__(self):
        free(self.acked)
        free(self.failed)
        free(self.sent)
        free(self.quorum)

    cdef void _allocate(self, Py_ssize_t capacity) except *:
        """Slots for `capacity` entries, the tracked ones moved over."""
        cdef uint64_t *acked = <uint64_t *>calloc(capacity, sizeof(uint64_t))
        cdef uint64_t *failed = <uint64_t *>calloc(capacity, sizeof(uint64_t))
        cdef double *sent = <double *>calloc(capacity, sizeof(double))
        cdef unsigned char *quorum = <unsigned char *>calloc(capacity, 1)
        if not acked or not failed or not sent or not quorum:
            free(acked); free(failed); free(sent); free(quorum)
            raise MemoryError()
        cdef int64_t e
        cdef Py_ssize_t old, new
        for e in range(self.tail, self.head):
            old = e % self.capacity
            new = e % capacity
            acked[new] = self.acked[old]
            failed[new] = self.failed[old]
            sent[new] = self.sent[old]
            quorum[new] = self.quorum[old]
        free(self.acked); free(self.failed); free(self.sent); free(self.quorum)
        self.acked, self.failed, self.sent, self.quorum = acked, failed, sent, quorum
        self.capacity = capacity

    cdef inline int _bit(self, int64_t entry_id, int index) noexcept:
        """The write-set position of ensemble index `index` for the entry, -1 if not in it."""
        if index < 0 or index >= self.ensemble_size:
            return -1
        cdef int position = <int>((index - entry_id % self.ensemble_size + self.ensemble_size)
                                  % self.ensemble_size)
        return position if position < self.write_quorum else -1

    cdef inline uint64_t _all(self) noexcept:
        return (<uint64_t>-1) if self.write_quorum == 64 else (
            ((<uint64_t>1) << self.write_quorum) - 1)

    def push(self, double sent_at):
        """Track the next entry, sent at `sent_at` (the loop's clock); its id."""
        if self.head - self.tail >= self.capacity:
            self._allocate(self.capacity * 2)
        cdef Py_ssize_t slot = self.head % self.capacity
        self.acked[slot] = 0
        self.failed[slot] = 0
        self.sent[slot] = sent_at
        self.quorum[slot] = 0
        self.head += 1
        return self.head - 1

    cdef bint _ack(self, int64_t entry_id, int index) noexcept:
        """A copy acknowledged; true when this made the entry's ack quorum."""
        if entry_id < self.tail or entry_id >= self.head:
            return False
        cdef int position = self._bit(entry_id, index)
        if position < 0:
            return False
        cdef Py_ssize_t slot = entry_id % self.capacity
        cdef uint64_t bit = (<uint64_t>1) << position
        if (self.acked[slot] | self.failed[slot]) & bit:
            return False  # answered already: a duplicate or a late answer
        self.acked[slot] |= bit
        if not self.quorum[slot] and _popcount(self.acked[slot]) >= self.ack_quorum:
            self.quorum[slot] = 1
            return True
        return False

    def ack(self, int64_t entry_id, int index):
        """`index` acknowledged the entry (ignored outside the ring, outside the write set or
        when that copy already answered); True when the entry reached its ack quorum."""
        return self._ack(entry_id, index)

    def fail(self, int64_t entry_id, int index):
        """`index` failed to store the entry: the number of its copies failed so far, or -1
        when ignored (as for `ack`)."""
        if entry_id < self.tail or entry_id >= self.head:
            return -1
        cdef int position = self._bit(entry_id, index)
        if position < 0:
            return -1
        cdef Py_ssize_t slot = entry_id % self.capacity
        cdef uint64_t bit = (<uint64_t>1) << position
        if (self.acked[slot] | self.failed[slot]) & bit:
            return -1
        self.failed[slot] |= bit
        self._advance_tail()
        return _popcount(self.failed[slot])

    def has_quorum(self, int64_t entry_id):
        if entry_id < self.tail:
            return True
        if entry_id >= self.head:
            return False
        return bool(self.quorum[entry_id % self.capacity])

    def failed_indexes(self, int64_t entry_id):
        """The ensemble indexes that failed the entry (ascending)."""
        if entry_id < self.tail or entry_id >= self.head:
            return []
        cdef uint64_t failed = self.failed[entry_id % self.capacity]
        cdef int position
        return sorted((entry_id + position) % self.ensemble_size
                      for position in range(self.write_quorum) if failed >> position & 1)

    cdef void _advance_tail(self) noexcept:
        cdef uint64_t full = self._all()
        cdef Py_ssize_t slot
        while self.tail < self.completed:
            slot = self.tail % self.capacity
            if (self.acked[slot] | self.failed[slot]) & full != full:
                break
            self.tail += 1

    def take_completed(self):
        """Hand over the entries in order from `completed` that reached their quorum: how
        many (the caller completes that many of its oldest adds)."""
        cdef int64_t start = self.completed
        while self.completed < self.head and self.quorum[self.completed % self.capacity]:
            self.completed += 1
        self._advance_tail()
        return self.completed - start

    def take_all(self):
        """Hand over every entry (the writer failed them all): how many were pending."""
        cdef int64_t start = self.completed
        self.tail = self.completed = self.head
        return self.head - start

    def expire(self, int index, double sent_before):
        """Fail the copies at `index` still unanswered of entries sent before `sent_before`:
        their ids."""
        return self._fail_where(index, sent_before, True)

    def fail_index(self, int index):
        """Fail every copy at `index` still unanswered (its bookie is lost): their ids."""
        return self._fail_where(index, 0.0, False)

    cdef list _fail_where(self, int index, double sent_before, bint by_time):
        cdef list ids = []
        cdef int64_t e
        cdef int position
        cdef Py_ssize_t slot
        cdef uint64_t bit
        for e in range(self.tail, self.head):
            position = self._bit(e, index)
            if position < 0:
                continue
            slot = e % self.capacity
            if by_time and self.sent[slot] >= sent_before:
                continue
            bit = (<uint64_t>1) << position
            if (self.acked[slot] | self.failed[slot]) & bit:
                continue
            self.failed[slot] |= bit
            ids.append(e)
        self._advance_tail()
        return ids

    def reset_index(self, int index, double sent_at):
        """A new bookie took ensemble index `index`: the pending entries (from `completed`)
        forget that copy's answer, their quorum is counted again and they count as sent at
        `sent_at`; their ids are returned (to be sent to the new bookie). Entries already
        handed over with that copy unanswered count it as failed (nothing will answer it)."""
        cdef list ids = []
        cdef int64_t e
        cdef int position
        cdef Py_ssize_t slot
        cdef uint64_t bit
        for e in range(self.tail, self.head):
            slot = e % self.capacity
            position = self._bit(e, index)
            if position >= 0:
                bit = (<uint64_t>1) << position
                if e < self.completed:
                    if not (self.acked[slot] | self.failed[slot]) & bit:
                        self.failed[slot] |= bit
                else:
                    self.acked[slot] &= ~bit
                    self.failed[slot] &= ~bit
                    self.sent[slot] = sent_at
                    ids.append(e)
            if e >= self.completed:
                self.quorum[slot] = _popcount(self.acked[slot]) >= self.ack_quorum
        self._advance_tail()
        return ids

    @property
    def outstanding(self):
        """Entries with a copy not yet answered (or not yet handed over)."""
        return self.head - self.tail


cdef class AckListener:
    """One connection's answers for one writer: acknowledgements go to `ring` at
    `index`; error answers are kept as (entry id, result code) for `deliver`, which calls
    `callback(errors)` once per read that reached this listener."""

    cdef readonly AckRing ring
    cdef readonly int index
    cdef readonly object callback
    cdef list errors
    cdef bint touched

    def __cinit__(self, AckRing ring, int index, callback):
        self.ring = ring
        self.index = index
        self.callback = callback
        self.errors = []
        self.touched = False

    cdef inline void _answer(self, int code, int64_t entry_id, list reached) except *:
        if code == 0:
            self.ring._ack(entry_id, self.index)
        else:
            self.errors.append((entry_id, code))
        if not self.touched:
            self.touched = True
            reached.append(self)

    def answer(self, int code, int64_t entry_id):
        """One answer (for a caller holding it outside a read)."""
        cdef list reached = []
        self._answer(code, entry_id, reached)

    def deliver(self):
        """Report the answers since the last `deliver` to `callback` (errors, maybe none)."""
        errors = self.errors
        if errors:
            self.errors = []
        self.touched = False
        self.callback(errors)


def route_responses(bytes buf, Py_ssize_t start, Py_ssize_t end, dict listeners,
                    dict awaited):
    """One pass over the whole frames of buf[start:end] (length prefixes included and checked,
    as `FrameReader.whole` returns them): an add response of a ledger with a listener goes to
    it, unless a request with its key (opcode, ledger id, entry id) is in `awaited`. Returns
    (the listeners reached, the (start, end) of every other frame body), the latter in order,
    decoded as before by the caller, which also reports malformed ones."""
    if buf is None:
        raise TypeError("a bytes buffer is required, not None")
    cdef Py_ssize_t total = PyBytes_GET_SIZE(buf)
    if start < 0 or end > total or start > end:
        raise ValueError(f"span {start}..{end} outside a buffer of {total} bytes")
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(buf)
    cdef list reached = []
    cdef list others = []
    cdef Py_ssize_t pos = start, body, size
    cdef uint32_t head
    cdef int opcode, code
    cdef int64_t ledger_id, entry_id, last_ledger = -1
    cdef AckListener listener = None
    cdef PyObject *found
    cdef bint check_awaited = len(awaited) > 0
    cdef bint have_listeners = len(listeners) > 0
    while pos + 4 <= end:
        size = addpath_be32(p + pos)
        body = pos + 4
        if body + size > end:
            raise ValueError(f"frame of {size} bytes at {pos} runs past {end}")
        pos = body + size
        if not have_listeners or size < RESPONSE_BODY:
            others.append((body, pos))
            continue
        head = addpath_be32(p + body)
        opcode = (head >> 16) & 0xFF if head >> 24 else head & 0xFF
        if opcode != OP_ADD_ENTRY:
            others.append((body, pos))
            continue
        code = <int>addpath_be32(p + body + 4)
        ledger_id = addpath_be64(p + body + 8)
        entry_id = addpath_be64(p + body + 16)
        if listener is None or ledger_id != last_ledger:
            found = PyDict_GetItem(listeners, ledger_id)
            if found == NULL:
                others.append((body, pos))
                continue
            listener = <AckListener?>found
            last_ledger = ledger_id
        if check_awaited and (OP_ADD_ENTRY, ledger_id, entry_id) in awaited:
            others.append((body, pos))
            continue
        listener._answer(code, entry_id, reached)
    return reached, others
